"""The graphiti embedder adapter over our `Embedder`."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pytest

from agent.core.errors import EmbeddingInputError
from agent.graph.embedder import GraphitiEmbedder
from agent.search.embeddings import InputType, Vectors
from bench.fakes.hashing_embedder import HashingEmbedder


async def test_create_and_batch_give_the_embedders_unit_vectors() -> None:
    adapter = GraphitiEmbedder(HashingEmbedder(dimensions=64))

    one = await adapter.create("I live in Paris")
    batch = await adapter.create_batch(["I live in Paris", "We joked about the mug"])

    assert len(one) == 64 and math.isclose(sum(v * v for v in one), 1.0, rel_tol=1e-5)
    assert batch[0] == pytest.approx(one)
    assert len(batch) == 2 and batch[1] != batch[0]
    assert await adapter.create_batch([]) == []


async def test_token_ids_are_refused() -> None:
    with pytest.raises(EmbeddingInputError):
        await GraphitiEmbedder(HashingEmbedder()).create([1, 2, 3])


async def test_queries_are_embedded_as_queries() -> None:
    seen: list[str] = []

    class Recording(HashingEmbedder):
        async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
            seen.append(input_type)
            return await super().embed(texts, input_type=input_type)

    adapter = GraphitiEmbedder(Recording(dimensions=16))
    assert await adapter.create_query("where do I live") == await adapter.create("where do I live")
    await adapter.create_batch(["I live in Paris"])
    assert seen == ["query", "document", "document"]
