"""`bench recall --facts`'s context figure: what the first request of a new conversation already holds.

For each LoCoMo question, the first request of a new session at the question's time (the day after
the conversation's last session) is built by the product's own context builder, with the file's
observations as the person's facts and no tool call: the profile (`<about_them>`) and the facts
recalled for the question (the turn's note). A question counts when one of its evidence turns is a
source of a fact in that request. Systems: the list with vectors (the configured embedder, MiniLM
when none), the list by full text alone, and the knowledge graph's tier alone (what the prompt held
of facts before the one list reached it, measured with the graph on; without a graph it held none).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.builder import ContextBuilder
from agent.context.facts import MessageFacts
from agent.core.settings import Settings
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.embeddings import Embedder
from agent.search.recall import Recall
from bench.common import percentile
from bench.recall_graph import HAVE_EMBEDDED_GRAPH, graph_of_observations, graph_tier
from bench.recall_setup import CATEGORIES, Loaded, evidence_ids
from db.models import User
from db.repositories.dedupe import normalise
from db.repositories.facts import FactRepository


@dataclass
class Held:
    """Share of questions whose evidence lies behind a fact of the first request, per category."""

    hits: dict[int, list[bool]] = field(default_factory=lambda: defaultdict(list))
    profile_hits: dict[int, list[bool]] = field(default_factory=lambda: defaultdict(list))
    facts: list[int] = field(default_factory=list)
    tokens: list[int] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)

    def share(self, categories: Sequence[int], *, profile_only: bool = False) -> tuple[float, int]:
        """(share, n) over the given categories."""
        source = self.profile_hits if profile_only else self.hits
        values = [v for c in categories for v in source[c]]
        return (sum(values) / len(values) if values else 0.0), len(values)


async def _sources(sessions: async_sessionmaker[AsyncSession], user_id: int) -> dict[str, set[int]]:
    """Each held fact's words and the messages it comes from."""
    async with sessions() as session:
        facts = await FactRepository(session).held(user_id)
    out: dict[str, set[int]] = {}
    for fact in facts:
        out.setdefault(fact.content, set()).update(int(m) for m in fact.message_ids or [])
    return out


@dataclass(frozen=True)
class System:
    """One way of filling the first request: what finds the facts, and whether the profile counts
    (the graph's tier alone is measured without it, as the prompt was before the list reached it)."""

    facts: MessageFacts
    profile: bool = True


async def measure_context(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    loaded: Sequence[Loaded],
    systems: Mapping[str, System],
) -> dict[str, Held]:
    """Build every question's first request under each system and score what it holds."""
    builders = {
        name: ContextBuilder(settings, facts=system.facts, summary_model="test")
        for name, system in systems.items()
    }
    results = {name: Held() for name in systems}
    problems: defaultdict[str, int] = defaultdict(int)
    for item in loaded:
        sources = await _sources(sessions, item.user_id)
        async with sessions() as session:
            user = await session.get(User, item.user_id)
        assert user is not None
        for question in item.questions:
            evidence = evidence_ids(question.get("evidence", []), item.dia_to_message, problems)  # type: ignore[arg-type]
            if not evidence:
                continue
            category = int(question["category"])
            for name, builder in builders.items():
                started = time.perf_counter()
                built = await builder.build(
                    sessions,
                    user=user,
                    conversation=None,
                    text=str(question["question"]),
                    now=item.end,
                    previous_message_at=item.end,
                )
                results[name].ms.append((time.perf_counter() - started) * 1000)
                blocks = (
                    dict(built.blocks) if systems[name].profile else {"memory": built.blocks.get("memory")}
                )
                shown = _shown_facts(blocks, sources)
                profile = _shown_facts({"profile": blocks.get("profile")}, sources)
                covered = {m for fact in shown for m in sources[fact]}
                in_profile = {m for fact in profile for m in sources[fact]}
                results[name].hits[category].append(bool(evidence & covered))
                results[name].profile_hits[category].append(bool(evidence & in_profile))
                results[name].facts.append(len(shown))
                tiers = built.snapshot["tiers"]
                counted = ("profile", "memory") if systems[name].profile else ("memory",)
                results[name].tokens.append(sum(tiers.get(t, {}).get("tokens", 0) for t in counted))
    return results


def _shown_facts(blocks: Mapping[str, Any], sources: Mapping[str, set[int]]) -> set[str]:
    """The held facts whose words a block's items show (profile and recall lines are "- <fact>"; the
    graph's carry "(since ...)" and may have lost the final full stop)."""
    by_words = {normalise(text): text for text in sources}
    shown: set[str] = set()
    for name in ("profile", "memory"):
        block = blocks.get(name)
        if block is None:
            continue
        for item in block.items:
            text = item.removeprefix("- ").strip().split(" (since ", 1)[0]
            if (fact := by_words.get(normalise(text))) is not None:
                shown.add(fact)
    return shown


def print_context(results: Mapping[str, Held]) -> None:
    """The context figure, per category and overall."""
    print(
        "context: the first request of a new conversation at the question's time, no tool call; share of"
        " questions whose evidence turn lies behind a fact in it (profile or recalled)"
    )
    labels = [(f"{c} {CATEGORIES[c]}", [c]) for c in CATEGORIES] + [("overall", list(CATEGORIES))]
    header = f"{'system':18} " + " ".join(f"{label:>14}" for label, _ in labels) + f" {'profile only':>13}"
    print(header)
    for name, held in results.items():
        cells = []
        for _, categories in labels:
            share, n = held.share(categories)
            cells.append(f"{share:8.3f} ({n:3})")
        alone, _ = held.share(list(CATEGORIES), profile_only=True)
        print(f"{name:18} " + " ".join(f"{c:>14}" for c in cells) + f" {alone:13.3f}")
    print("without a graph, before the list reached the prompt, the first request held no fact: 0 everywhere")
    for name, held in results.items():
        if held.ms:
            print(
                f"{name:18} facts in the request: mean {statistics.fmean(held.facts):.1f}; their tiers'"
                f" tokens mean {statistics.fmean(held.tokens):.0f}; build p50 {percentile(held.ms, 50):.1f}"
                f" ms, p95 {percentile(held.ms, 95):.1f} ms"
            )


async def run_context_figure(
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    samples: Sequence[dict[str, Any]],
    loaded: Sequence[Loaded],
    *,
    embedder: Embedder,
    units: FactUnits,
) -> dict[str, Held]:
    """Measure the context figure: the list with vectors, by full text, and the graph's tier alone
    (when the embedded graph is installed); `print_context` prints it."""
    dialect = sessions.kw["bind"].dialect.name
    systems: dict[str, System] = {}
    for name, chosen in (("list, hybrid", embedder), ("list, full text", None)):
        recall = Recall(settings=settings, sessions=sessions, dialect=dialect, embedder=chosen, units=units)
        systems[name] = System(Facts(settings, recall, units=units))
    with tempfile.TemporaryDirectory(prefix="nikita-recall-graph-") as folder:
        graph = None
        if HAVE_EMBEDDED_GRAPH:
            started = time.perf_counter()
            graph = await graph_of_observations(str(Path(folder) / "graph.db"), samples, loaded, embedder)
            print(f"graph of the observations written in {time.perf_counter() - started:.0f} s")
            systems["graph tier alone"] = System(graph_tier(graph), profile=False)
        else:
            print("graph tier: falkordblite is not installed (the `embedded` extra), not measured")
        try:
            results = await measure_context(settings, sessions, loaded, systems)
        finally:
            if graph is not None:
                await graph.close()
    return results
