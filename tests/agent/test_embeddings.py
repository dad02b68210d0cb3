"""Tests for agent/search/embeddings.py: the local MiniLM model offline, and the two stand-ins."""

from __future__ import annotations

import asyncio
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

from agent.core.errors import EmbedderUnavailableError
from agent.search.embeddings import InferenceTurns, MiniLMEmbedder
from tests.offline import ISOLATIONS, run_offline

CHAT = [
    "I adopted a puppy",
    "We got a new dog",
    "The stock market fell today",
    "hi",
    "",
    "What did I tell you about my sister's wedding in June? I think it was in Lisbon.",
    "Remind me to call mum on Sunday",
    "lol 😂 that's wild",
    "Ich habe heute keinen Hunger.",
    "My favourite band is Radiohead and I saw them live in 2017, best night of my life honestly",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    # One matrix thread, as the product's default: the suite runs three workers on two cores, where a
    # second OpenBLAS thread spins against the other workers and made each embedding 10-20x slower.
    embedder = MiniLMEmbedder(threads=1)
    embedder.load()
    return embedder


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


_OFFLINE_SCRIPT = textwrap.dedent(
    """
    from agent.search.embeddings import MiniLMEmbedder

    vectors = MiniLMEmbedder(threads=1).embed_sync(["offline hello"])
    assert not touched, touched
    print(vectors.shape, round(float(vectors[0] @ vectors[0]), 4))
    """
)


@pytest.mark.process
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_loads_and_embeds_without_network(isolation: str, tmp_path: Path) -> None:
    assert run_offline(_OFFLINE_SCRIPT, isolation, tmp_path).strip() == "(1, 384) 1.0"


async def test_dimensions_and_unit_rows(minilm: MiniLMEmbedder) -> None:
    vectors = await minilm.embed(CHAT)
    assert minilm.dimensions == 384
    assert vectors.shape == (len(CHAT), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_semantic_sanity(minilm: MiniLMEmbedder) -> None:
    puppy, dog, market = await minilm.embed(
        ["I adopted a puppy", "We got a new dog", "The stock market fell today"]
    )
    assert _cos(puppy, dog) > _cos(puppy, market) + 0.2


async def test_batching_matches_one_by_one(minilm: MiniLMEmbedder) -> None:
    # Many more texts than one internal batch (4), of mixed lengths, so sorting and padding both matter.
    texts = [f"{text} ({i})" for i, text in enumerate(CHAT * 4)]
    together = await minilm.embed(texts)
    alone = np.vstack([await minilm.embed([text]) for text in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


async def test_empty_input(minilm: MiniLMEmbedder) -> None:
    vectors = await minilm.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


async def test_long_text_is_truncated_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    # Each "puppy" is one token; 300 of them already exceed 256, so more words change nothing.
    long, longer = await minilm.embed(["puppy " * 300, "puppy " * 5000 + "stock market crash"])
    np.testing.assert_allclose(long, longer, atol=1e-6)


async def test_parallel_calls(minilm: MiniLMEmbedder) -> None:
    expected = await minilm.embed(CHAT)
    results = await asyncio.gather(*(minilm.embed(CHAT[i:] + CHAT[:i]) for i in range(8)))
    for i, vectors in enumerate(results):
        np.testing.assert_allclose(np.roll(vectors, i, axis=0), expected, atol=1e-5)


async def test_event_loop_keeps_running_while_embedding(minilm: MiniLMEmbedder) -> None:
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.001)
            ticks += 1

    task = asyncio.create_task(ticker())
    await minilm.embed(CHAT * 5)
    task.cancel()
    assert ticks >= 3


async def test_lazy_load_on_first_embed() -> None:
    embedder = MiniLMEmbedder(threads=1)
    (vector,) = await embedder.embed(["loaded on demand"])
    assert vector.shape == (384,)


def test_a_missing_model_file_is_named(tmp_path: Path) -> None:
    absent = tmp_path / "weights.npz"
    with pytest.raises(EmbedderUnavailableError, match=r"weights\.npz"):
        MiniLMEmbedder(model=absent).load()


def test_a_corrupt_model_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "weights.npz"
    broken.write_bytes(b"PK\x03\x04 not really a zip archive")
    with pytest.raises(EmbedderUnavailableError, match="unreadable"):
        MiniLMEmbedder(model=broken).load()


def test_a_weights_file_without_the_model_is_refused(tmp_path: Path) -> None:
    stranger = tmp_path / "weights.npz"
    np.savez(stranger, something=np.zeros(3))
    with pytest.raises(EmbedderUnavailableError, match="unreadable"):
        MiniLMEmbedder(model=stranger).load()


async def test_vectors_match_the_published_model(minilm: MiniLMEmbedder) -> None:
    # Written by .ci/minilm_reference.py: onnxruntime running the published int8 ONNX model.
    with np.load(Path(__file__).parent / "data" / "minilm_reference.npz") as reference:
        texts, expected = [str(text) for text in reference["texts"]], reference["vectors"]
    alone = np.vstack([await minilm.embed([text]) for text in texts])
    together = await minilm.embed(texts)
    np.testing.assert_allclose(alone, expected, atol=2e-5)
    np.testing.assert_allclose(together, expected, atol=2e-5)


def test_a_waiting_query_runs_before_the_waiting_documents() -> None:
    turns = InferenceTurns()
    order: list[str] = []
    running, release = threading.Event(), threading.Event()

    def run(name: str, *, query: bool, hold: threading.Event | None = None) -> None:
        with turns.hold(query=query):
            order.append(name)
            if hold is not None:
                running.set()
                hold.wait(10)

    first = threading.Thread(target=run, args=("document 1",), kwargs={"query": False, "hold": release})
    first.start()
    assert running.wait(10)  # the first document runs
    # Three more documents wait for their turn, then a query comes: all wait behind the running one.
    documents = [
        threading.Thread(target=run, args=(f"document {n}",), kwargs={"query": False}) for n in (2, 3, 4)
    ]
    for count, document in enumerate(documents, start=1):
        document.start()
        assert turns.wait_for_waiting(documents=count, timeout=10)
    query = threading.Thread(target=run, args=("query",), kwargs={"query": True})
    query.start()
    assert turns.wait_for_waiting(queries=1, documents=3, timeout=10)
    assert order == ["document 1"]
    release.set()
    for thread in (first, *documents, query):
        thread.join(10)
    assert order[:2] == ["document 1", "query"]
    assert sorted(order[2:]) == ["document 2", "document 3", "document 4"]
