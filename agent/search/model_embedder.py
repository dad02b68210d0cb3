"""Our `Embedder` over a PydanticAI embedding model, local or hosted: batches, unit rows, one width.

PydanticAI's `Embedder` speaks to the model (its client retries rate limits and server errors);
this adapter cuts long lists into batches the provider accepts, turns the rows into one float32
array, refuses rows of another width than the vector space's (so two widths never meet in one
index), and turns a failed request into `EmbeddingFailedError`, which indexing logs and search
answers with full text alone.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
from pydantic_ai.embeddings import Embedder as PydanticAIEmbedder
from pydantic_ai.embeddings import EmbeddingModel, EmbeddingSettings
from pydantic_ai.exceptions import (
    ModelAPIError,
    ModelAuthenticationError,
    ModelNotFoundError,
    UnexpectedModelBehavior,
)

from agent.core.errors import EmbeddingFailedError, EmbeddingRefusedError, EmbeddingWidthError
from agent.core.usage import record_call
from agent.search.embeddings import InputType, Vectors, normalise
from agent.search.local_models import LocalEmbeddingModel

logger = logging.getLogger(__name__)


class ModelEmbedder:
    """An `Embedder` over any PydanticAI embedding model.

    `dimensions` is the width of the vector space: given (a local model's, or EMBEDDER_DIMENSIONS),
    or learned by `prepare()` from one request; 0 until known.
    """

    def __init__(
        self,
        model: EmbeddingModel,
        *,
        name: str,
        dimensions: int | None = None,
        batch_size: int = 64,
        settings: EmbeddingSettings | None = None,
    ) -> None:
        self.model = model
        self.name = name
        self.dimensions = dimensions or 0
        self.batch_size = max(1, batch_size)
        self.input_tokens = 0  # what the provider counted (and bills), all requests of this process
        self._embedder = PydanticAIEmbedder(model, settings=settings)

    def load(self) -> None:
        """Load a local model now (idempotent); a hosted one has nothing to load."""
        if isinstance(self.model, LocalEmbeddingModel):
            self.model.load()

    async def prepare(self) -> None:
        """Learn the vector width from one request when it is not known yet."""
        if self.dimensions <= 0:
            self.dimensions = int((await self._request(["dimensions"], "document")).shape[1])
            logger.info(
                "embedding width learned", extra={"embedder": self.name, "dimensions": self.dimensions}
            )

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """One unit row per text; raises `EmbeddingFailedError` when the model fails a request."""
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        texts = list(texts)
        parts = [
            await self._request(texts[start : start + self.batch_size], input_type)
            for start in range(0, len(texts), self.batch_size)
        ]
        return parts[0] if len(parts) == 1 else np.vstack(parts)

    async def _request(self, texts: list[str], input_type: InputType) -> Vectors:
        try:
            result = await self._embedder.embed(texts, input_type=input_type)
        except (ModelAuthenticationError, ModelNotFoundError) as exc:
            raise EmbeddingRefusedError(f"{self.name}: {exc}") from exc
        except (ModelAPIError, UnexpectedModelBehavior) as exc:
            raise EmbeddingFailedError(f"{self.name}: {exc}") from exc
        self.input_tokens += result.usage.input_tokens
        if not isinstance(self.model, LocalEmbeddingModel):  # a hosted model's tokens are spend
            record_call("embedding", input_tokens=result.usage.input_tokens, output_tokens=0)
        try:
            vectors = np.asarray(result.embeddings, dtype=np.float32)
        except ValueError as exc:  # rows of different lengths
            raise EmbeddingWidthError(f"{self.name} answered rows of different widths") from exc
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise EmbeddingFailedError(
                f"{self.name} answered {len(result.embeddings)} vectors for {len(texts)} texts"
            )
        if self.dimensions > 0 and vectors.shape[1] != self.dimensions:
            raise EmbeddingWidthError(
                f"{self.name} answered {vectors.shape[1]} dimensions, its index holds {self.dimensions}: "
                "restart (with EMBEDDER_DIMENSIONS empty or the new width), then `python -m bot reindex`"
            )
        return normalise(vectors)
