"""`python -m bot bench graph`: the knowledge graph's cost per episode and its memory-tier latency.

It runs on a throw-away embedded FalkorDB (falkordblite) in a temporary directory, never on
GRAPH_PATH, and with graphiti's LLM replaced by the instant scripted model, so it measures our code,
graphiti and the database, not a provider. Part 1 adds episodes one by one (LLM calls and ms per
episode, plus a rerun of an already-written source). Part 2 writes 1,000 episodes for one user
across the three groups (entities, facts and embeddings as graphiti stores them) and times the
memory tier's query: the three groups searched in parallel with the standard limits 50/30/20.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from agent.graph.bench import run_graph_bench
from agent.search.recall import shared_embedder
from agent.settings import Settings


def _lines(figures: dict[str, Any]) -> list[str]:
    episode, search = figures["episode"], figures["search"]
    prompts = ", ".join(f"{name} {count}" for name, count in sorted(episode["calls_by_prompt"].items()))
    return [
        f"graph benchmark: {figures['backend']}, embedder {figures['embedder']}, instant scripted LLM",
        f"add_episode x{episode['episodes']}: LLM calls mean {episode['llm_calls_mean']:.1f} "
        f"(first {episode['llm_calls_first']}, max {episode['llm_calls_max']}); "
        f"ms p50 {episode['ms_p50']} / p95 {episode['ms_p95']} / mean {episode['ms_mean']}; "
        f"rerun of a written source {episode['rerun_ms']} ms",
        f"  LLM calls by prompt: {prompts}",
        f"memory tier query at {search['episodes_per_user']} episodes per user ({search['corpus']}, "
        f"loaded in {search['corpus_load_seconds']} s), {search['searches']} searches, {search['limits']}: "
        f"p50 {search['ms_p50']} ms / p95 {search['ms_p95']} ms / max {search['ms_max']} ms; "
        f"facts per search {search['facts_returned_mean']}",
    ]


async def run_graph_bench_command(settings: Settings, *, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark with the configured embedder (EMBEDDER) and print its figures."""
    embedder = shared_embedder(settings.embedder, threads=settings.embedder_threads)
    with tempfile.TemporaryDirectory(prefix="nikita-graph-bench-") as folder:
        figures = await run_graph_bench(
            path=str(Path(folder) / "graph.db"),
            episodes=5 if quick else 20,
            corpus_episodes=100 if quick else 1000,
            searches=20 if quick else 100,
            embedder=embedder,
        )
    for line in _lines(figures):
        print(line, flush=True)
    return figures
