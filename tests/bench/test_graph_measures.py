"""The graph benchmark runs end to end at a small size and reports its figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.graph import run_graph_bench
from tests.agent.graph.conftest import HAVE_FALKORDBLITE, IN_CI

pytestmark = pytest.mark.process


async def test_the_benchmark_reports_write_cost_and_both_read_recipes(tmp_path: Path) -> None:
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed")

    figures = await run_graph_bench(
        path=str(tmp_path / "graph.db"), conversations=2, scales=(40,), searches=5
    )

    writes = {write["mode"]: write for write in figures["writes"]}
    extraction, facts = writes["graphiti extraction"], writes["list facts"]
    # Each conversation's episodes cost model calls, and the scripted model counted their prompts' tokens.
    assert extraction["llm_calls_mean"] >= 3 and extraction["input_tokens_mean"] > 1000
    assert extraction["calls_by_prompt"]["ExtractedEntities"] == 6
    # The rows written as triplets (two facts, the day's two moments, a thought): only graphiti's
    # dedupe/contradiction prompt, at most once per line.
    assert set(facts["calls_by_prompt"]) == {"EdgeDuplicate"} and facts["llm_calls_max"] <= 5
    assert facts["llm_calls_mean"] * 2 <= extraction["llm_calls_mean"]
    for write in writes.values():
        assert write["rerun_ms"] < write["ms_mean"]  # an already-written source is skipped
    reads = {read["recipe"]: read for read in figures["reads"]}
    assert set(reads) == {"graphiti", "indexed"}
    for read in reads.values():
        assert read["episodes_per_user"] == 40 and read["searches"] == 5 + read["questions"]
        assert read["facts_returned_mean"] > 0
        assert 0 < read["ms_p50"] <= read["ms_p95"] <= read["ms_max"]
        assert read["superseded_shown"] == 0
    # The planted facts are found: the corpus and the questions are consistent.
    assert reads["indexed"]["hit_at_10"] >= reads["graphiti"]["hit_at_10"] > 0
