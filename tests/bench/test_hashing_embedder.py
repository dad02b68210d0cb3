"""The hashing embedder the tests and benchmarks share: deterministic across processes, unit rows,
and texts that share words close."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from agent.search.embeddings import Embedder
from bench.fakes.hashing_embedder import HashingEmbedder

ROOT = Path(__file__).resolve().parents[2]
TEXTS = [
    "I adopted a puppy",
    "We got a new dog",
    "hi",
    "",
    "lol 😂 that is wild",
    "Ich habe heute keinen Hunger.",
]


async def test_hashing_embedder_is_deterministic_and_normalised() -> None:
    embedder: Embedder = HashingEmbedder()
    first = await embedder.embed(TEXTS)
    again = await HashingEmbedder().embed(TEXTS)
    assert first.shape == (len(TEXTS), 384)
    assert first.dtype == np.float32
    np.testing.assert_array_equal(first, again)
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-5)
    assert (await embedder.embed([])).shape == (0, 384)


async def test_hashing_embedder_rewards_shared_words() -> None:
    cat, cat_again, tax = await HashingEmbedder(dimensions=64).embed(
        ["my cat Luna sleeps", "Luna the CAT", "quarterly tax return"]
    )
    assert cat.shape == (64,)
    assert float(cat @ cat_again) > 0.5
    assert float(cat @ cat_again) > float(cat @ tax)


@pytest.mark.process
def test_hashing_embedder_is_stable_across_processes(tmp_path: Path) -> None:
    script = (
        "import asyncio; from bench.fakes.hashing_embedder import HashingEmbedder; "
        "print(asyncio.run(HashingEmbedder().embed(['stable words'])).tobytes().hex())"
    )
    # bench/ is not installed with the product: the child finds it in the checkout.
    env = {**os.environ, "PYTHONHASHSEED": "random", "PYTHONPATH": str(ROOT)}
    runs = {
        subprocess.run(
            [sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1 and runs != {""}
