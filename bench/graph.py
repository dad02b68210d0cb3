"""`python -m bot bench graph`: the knowledge graph's cost per closed conversation and its recall tier.

It runs on a throw-away embedded FalkorDB (falkordblite) in a temporary directory, never on
GRAPH_PATH, and with graphiti's LLM replaced by the instant scripted model (which counts tokens of
the real prompts with tiktoken), so it measures our code, graphiti and the database, not a
provider. Part 1 writes closed conversations (LLM calls, tokens, ms per conversation, plus a rerun
of an already-written source), once as three episodes through graphiti's own extraction (user
facts, shared history, thoughts) and once as what the graph job writes: the list's facts, the
day's key moments and the thoughts, each an episode of its group pointing back to its row.
Part 2 writes a generated graph of 1,000 and of 10,000 episodes for one user (planted facts with
known questions included) and times the recall tier (three groups in parallel, standard limits
50/30/20) with graphiti's edge search and with our indexed query, with the query embedded by the
graph and as recall sends it (embedded once for the list and the graph), and counts how many
planted answers each ranks in its top 5/10.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Literal

from agent.core.settings import Settings
from agent.core.usage import metering
from agent.graph import STANDARD_LIMITS, open_graph
from agent.graph.base import Group, ListedFact
from agent.graph.graphiti_backend import GraphitiGraph, SearchRecipe
from agent.search.embedders import open_embedder
from agent.search.embeddings import Embedder
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedCall, ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder
from bench.graph_corpus import PLANTED, START, SUPERSEDED, WORDS, load_corpus

RECIPES: tuple[SearchRecipe, ...] = ("graphiti", "indexed")


WriteMode = Literal["graphiti extraction", "list facts"]
WRITE_MODES: tuple[WriteMode, ...] = ("graphiti extraction", "list facts")


def conversation_episodes(rng: random.Random) -> list[tuple[Group, str, list[str]]]:
    """What post-processing writes for one closed conversation: user facts, shared history, thoughts."""
    first, second, third, fourth = rng.sample(WORDS, 4)
    return [
        ("user", "user facts", [f"I live in {first}.", f"I like {second}."]),
        (
            "relationship",
            "conversation",
            [f"We talked about {third} and a trip.", f"She laughed about {third}."],
        ),
        ("persona", "thoughts", [f"I wonder whether {fourth} is worth a visit."]),
    ]


def listed(conversation: int, lines: list[str], at: datetime, group: Group = "user") -> list[ListedFact]:
    """A conversation's rows as the graph job hands them to the graph (made-up ids stand in for the
    rows and their messages): a fact or a thought a row each, a day's key moments one row."""
    first = conversation * 10 + 1
    if group == "relationship":
        return [ListedFact(first, "\n".join(lines), at, (first,))]
    return [ListedFact(first + n, line, at, (first + n,)) for n, line in enumerate(lines)]


def percentile(values: list[float], share: float) -> float:
    """The value at `share` (0..1) of the sorted values."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def measure_writes(
    graph: GraphitiGraph, llm: ScriptedLLMClient, conversations: int, mode: WriteMode, user_id: int
) -> dict[str, Any]:
    """Write `conversations` closed conversations' episodes; LLM calls, tokens and ms per conversation.

    `graphiti extraction` hands graphiti the three episodes' text (graphiti's own extraction);
    `list facts` writes the conversation's rows as triplets, an episode each (what the graph job
    does): its facts of the list, its day's key moments, its thoughts.
    """
    rng = random.Random(11)
    first_call = len(llm.calls)
    calls: list[int] = []
    tokens_in: list[int] = []
    tokens_out: list[int] = []
    times: list[float] = []
    for index in range(conversations):
        at = START + timedelta(hours=index)
        started = time.perf_counter()
        with metering() as meter:
            for group, name, lines in conversation_episodes(rng):
                if mode == "graphiti extraction":
                    await graph.add_episode(user_id, group, name, "\n".join(lines), at, f"c{index}:{group}")
                else:
                    await graph.add_facts(user_id, listed(index, lines, at, group), group)
        times.append((time.perf_counter() - started) * 1000)
        spend = meter.total()
        calls.append(spend.calls)
        tokens_in.append(spend.input_tokens)
        tokens_out.append(spend.output_tokens)
    started = time.perf_counter()
    if mode == "graphiti extraction":
        await graph.add_episode(user_id, "user", "again", "rerun", START, "c0:user")
    else:
        await graph.add_facts(user_id, listed(0, ["rerun"], START))
    return {
        "mode": mode,
        "conversations": conversations,
        "llm_calls_mean": statistics.mean(calls),
        "llm_calls_max": max(calls),
        "input_tokens_mean": round(statistics.mean(tokens_in)),
        "output_tokens_mean": round(statistics.mean(tokens_out)),
        "ms_mean": round(statistics.mean(times), 1),
        "ms_p95": round(percentile(times, 0.95), 1),
        "rerun_ms": round((time.perf_counter() - started) * 1000, 1),
        "calls_by_prompt": count_prompts(llm.calls[first_call:]),
    }


async def measure_reads(
    graph: GraphitiGraph, user_id: int, episodes: int, searches: int, recipe: SearchRecipe
) -> dict[str, Any]:
    """Memory-tier latency over random everyday queries, and hit@5/@10 over the planted questions."""
    graph.search_recipe = recipe
    rng = random.Random(3)
    now = START + timedelta(days=900)
    latencies: list[float] = []
    shared: list[float] = []
    found = 0
    for _ in range(searches):
        query = f"what about {' '.join(rng.sample(WORDS, 2))}?"
        started = time.perf_counter()
        results = await graph.search(user_id, query, limits=STANDARD_LIMITS, now=now)
        latencies.append((time.perf_counter() - started) * 1000)
        found += len(results)
        # In recall the query is embedded once, for the list and the graph: the graph's own share.
        vector = await graph.embedder.create_query(query)
        started = time.perf_counter()
        await graph.search(user_id, query, limits=STANDARD_LIMITS, now=now, vector=vector)
        shared.append((time.perf_counter() - started) * 1000)
    ranks: list[int | None] = []
    superseded = 0
    for question in PLANTED:
        started = time.perf_counter()
        results = await graph.search(user_id, question.text, limits=STANDARD_LIMITS, now=now)
        latencies.append((time.perf_counter() - started) * 1000)
        texts = [fact.text for fact in results.user]
        ranks.append(texts.index(question.answer) + 1 if question.answer in texts else None)
        superseded += SUPERSEDED in texts
    return {
        "recipe": recipe,
        "episodes_per_user": episodes,
        "searches": len(latencies),
        "facts_returned_mean": round(found / max(1, searches), 1),
        "ms_p50": round(percentile(latencies, 0.5), 1),
        "ms_p95": round(percentile(latencies, 0.95), 1),
        "ms_max": round(max(latencies), 1),
        "in_recall_ms_p50": round(percentile(shared, 0.5), 1),
        "in_recall_ms_p95": round(percentile(shared, 0.95), 1),
        "questions": len(PLANTED),
        "hit_at_5": sum(1 for r in ranks if r is not None and r <= 5),
        "hit_at_10": sum(1 for r in ranks if r is not None and r <= 10),
        "superseded_shown": superseded,
    }


async def run_graph_bench(
    *,
    path: str,
    conversations: int = 10,
    scales: tuple[int, ...] = (1000, 10_000),
    searches: int = 100,
    embedder: Embedder | None = None,
) -> dict[str, Any]:
    """Write cost per conversation with an instant scripted model, then reads at each scale per recipe.

    graphiti's recipe gets a quarter of the searches above 1,000 episodes: it takes seconds each there.
    """
    llm = ScriptedLLMClient()
    embedder = embedder or HashingEmbedder()
    graph = await open_graph(
        "falkordblite",
        url=None,
        path=path,
        llm_client=llm,
        embedder=embedder,
        clock=FrozenClock(current=START),
    )
    assert isinstance(graph, GraphitiGraph)
    figures: dict[str, Any] = {"backend": "falkordblite", "embedder": embedder.name, "reads": []}
    try:
        figures["writes"] = [
            await measure_writes(graph, llm, conversations, mode, user_id)
            for user_id, mode in enumerate(WRITE_MODES, start=1)
        ]
        for user_id, episodes in enumerate(scales, start=len(WRITE_MODES) + 1):
            started = time.perf_counter()
            await load_corpus(graph, user_id, episodes, random.Random(7))
            load_seconds = round(time.perf_counter() - started, 1)
            for recipe in RECIPES:
                count = searches if recipe == "indexed" or episodes <= 1000 else max(4, searches // 4)
                read = await measure_reads(graph, user_id, episodes, count, recipe)
                figures["reads"].append({**read, "corpus_load_seconds": load_seconds})
    finally:
        await graph.close()
    return figures


def count_prompts(calls: list[ScriptedCall]) -> dict[str, int]:
    """graphiti's LLM calls by response model."""
    counts: dict[str, int] = {}
    for call in calls:
        counts[call.response_model] = counts.get(call.response_model, 0) + 1
    return counts


def _lines(figures: dict[str, Any]) -> list[str]:
    lines = [f"graph benchmark: {figures['backend']}, embedder {figures['embedder']}, instant scripted LLM"]
    for writes in figures["writes"]:
        prompts = ", ".join(f"{name} {count}" for name, count in sorted(writes["calls_by_prompt"].items()))
        lines += [
            f"per closed conversation, {writes['mode']}, x{writes['conversations']}: LLM calls "
            f"mean {writes['llm_calls_mean']:.1f} (max {writes['llm_calls_max']}), tokens in "
            f"{writes['input_tokens_mean']} / out {writes['output_tokens_mean']}; "
            f"ms mean {writes['ms_mean']} / p95 {writes['ms_p95']}; "
            f"rerun of a written source {writes['rerun_ms']} ms",
            f"  LLM calls by prompt (all conversations): {prompts or 'none'}",
        ]
    for read in figures["reads"]:
        lines.append(
            f"recall tier, {read['recipe']:8} at {read['episodes_per_user']} episodes per user "
            f"(loaded in {read['corpus_load_seconds']} s), {read['searches']} searches: "
            f"p50 {read['ms_p50']} ms / p95 {read['ms_p95']} ms / max {read['ms_max']} ms; "
            f"hit@5 {read['hit_at_5']}/{read['questions']}, hit@10 {read['hit_at_10']}/{read['questions']}, "
            f"superseded shown {read['superseded_shown']}; facts per search {read['facts_returned_mean']}"
        )
        lines.append(
            f"  its share of recall (the query embedded once, for the list and the graph): "
            f"p50 {read['in_recall_ms_p50']} ms / p95 {read['in_recall_ms_p95']} ms"
        )
    return lines


async def run_graph_bench_command(settings: Settings, *, quick: bool = False) -> dict[str, Any]:
    """Run the benchmark with the configured embedder (EMBEDDER) and print its figures."""
    embedder = await open_embedder(settings)
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
