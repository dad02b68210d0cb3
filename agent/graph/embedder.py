"""Graphiti's `EmbedderClient` over our `Embedder`, so the graph embeds with the process's one
EMBEDDER (local and offline by default)."""

from __future__ import annotations

from collections.abc import Iterable

from graphiti_core.embedder.client import EmbedderClient

from agent.core.errors import EmbeddingInputError
from agent.search.embeddings import Embedder


class GraphitiEmbedder(EmbedderClient):
    """Adapts an `Embedder` (unit-length numpy rows) to graphiti's list-of-floats interface."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def create(
        self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]
    ) -> list[float]:
        """Embed one text (graphiti calls this for a node name, a fact, or a search query)."""
        if isinstance(input_data, str):
            text = input_data
        elif isinstance(input_data, list) and all(isinstance(item, str) for item in input_data):
            text = " ".join(str(item) for item in input_data)
        else:
            raise EmbeddingInputError("graphiti passed token ids; only text can be embedded")
        rows = await self.embedder.embed([text])
        return [float(value) for value in rows[0]]

    async def create_query(self, text: str) -> list[float]:
        """Embed a search query (models such as E5 or Voyage embed queries and facts differently)."""
        rows = await self.embedder.embed([text], input_type="query")
        return [float(value) for value in rows[0]]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        """Embed many texts in one model call."""
        if not input_data_list:
            return []
        rows = await self.embedder.embed(input_data_list)
        return [[float(value) for value in row] for row in rows]
