"""The graph benchmark runs end to end at a small size and reports its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.graph.bench import run_graph_bench

from .conftest import HAVE_FALKORDBLITE, IN_CI


async def test_the_benchmark_reports_calls_per_episode_and_search_latency(tmp_path: Path) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")

    figures = await run_graph_bench(
        path=str(tmp_path / "graph.db"), episodes=3, corpus_episodes=20, searches=5
    )

    episode = figures["episode"]
    # One episode: entities, edges, then per new fact a timestamp call (and a dedupe call once facts exist).
    assert episode["llm_calls_first"] >= 3
    assert episode["calls_by_prompt"]["ExtractedEntities"] == 3
    assert episode["rerun_ms"] < episode["ms_mean"]  # an already-written source is skipped
    search = figures["search"]
    assert search["episodes_per_user"] == 20 and search["searches"] == 5
    assert search["facts_returned_mean"] > 0
    assert 0 < search["ms_p50"] <= search["ms_p95"] <= search["ms_max"]
