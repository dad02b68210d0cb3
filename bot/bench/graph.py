"""`python -m bot bench graph`: the knowledge graph's cost per closed conversation and its memory tier.

It runs on a throw-away embedded FalkorDB (falkordblite) in a temporary directory, never on
GRAPH_PATH, and with graphiti's LLM replaced by the instant scripted model (which counts tokens of
the real prompts with tiktoken), so it measures our code, graphiti and the database, not a
provider. Part 1 writes closed conversations' three episodes (LLM calls, tokens, ms per
conversation, plus a rerun of an already-written source), once through graphiti's own
extraction and once as the extraction's facts written as triplets (what post-processing does).
Part 2 writes a generated graph of 1,000 and of 10,000 episodes for one user (planted facts with
known questions included) and times the memory tier (three groups in parallel, standard limits
50/30/20) with graphiti's edge search and with our indexed query, and counts how many planted
answers each ranks in its top 5/10.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from agent.graph.bench import run_graph_bench
from agent.search.recall import shared_embedder
from agent.settings import Settings


def _lines(figures: dict[str, Any]) -> list[str]:
    lines = [f"graph benchmark: {figures['backend']}, embedder {figures['embedder']}, instant scripted LLM"]
    for writes in figures["writes"]:
        prompts = ", ".join(f"{name} {count}" for name, count in sorted(writes["calls_by_prompt"].items()))
        lines += [
            f"per closed conversation (3 episodes), {writes['mode']}, x{writes['conversations']}: LLM calls "
            f"mean {writes['llm_calls_mean']:.1f} (max {writes['llm_calls_max']}), tokens in "
            f"{writes['input_tokens_mean']} / out {writes['output_tokens_mean']}; "
            f"ms mean {writes['ms_mean']} / p95 {writes['ms_p95']}; "
            f"rerun of a written source {writes['rerun_ms']} ms",
            f"  LLM calls by prompt (all conversations): {prompts or 'none'}",
        ]
    for read in figures["reads"]:
        lines.append(
            f"memory tier, {read['recipe']:8} at {read['episodes_per_user']} episodes per user "
            f"(loaded in {read['corpus_load_seconds']} s), {read['searches']} searches: "
            f"p50 {read['ms_p50']} ms / p95 {read['ms_p95']} ms / max {read['ms_max']} ms; "
            f"hit@5 {read['hit_at_5']}/{read['questions']}, hit@10 {read['hit_at_10']}/{read['questions']}, "
            f"superseded shown {read['superseded_shown']}; facts per search {read['facts_returned_mean']}"
        )
    return lines


async def run_graph_bench_command(settings: Settings, *, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark with the configured embedder (EMBEDDER) and print its figures."""
    embedder = shared_embedder(settings.embedder, threads=settings.embedder_threads)
    with tempfile.TemporaryDirectory(prefix="nikita-graph-bench-") as folder:
        figures = await run_graph_bench(
            path=str(Path(folder) / "graph.db"),
            conversations=3 if quick else 10,
            scales=(100,) if quick else (1000, 10_000),
            searches=20 if quick else 100,
            embedder=embedder,
        )
    for line in _lines(figures):
        print(line, flush=True)
    return figures
