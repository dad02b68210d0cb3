"""The knowledge graph as a view of the one list of facts, never a second list.

With GRAPH_BACKEND set, the graph is searched beside the list, and what it finds in the user group
counts through the list's facts its edges point back to (agent/graph/view.py): a held fact the
list's own ranking missed joins the facts found for a message and those `memory_search` finds,
with the list's words; an edge whose facts the person took back or hid shows nothing. A fact saved
changes the list and, in the same transaction, marks the person's facts as changed; the `graph` job
(jobs/graph.py) then makes the graph follow: new, reworded and revived facts written, the edges of
facts taken back or reworded ended when no other fact holds them up. `rebuild` writes a person's
graph again from the list. A graph that is slow or failing is skipped: the list answers alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock, ensure_utc
from agent.core.errors import GraphError
from agent.graph.base import EdgeFact, GraphResults, GroupLimits, KnowledgeGraph, ListedFact, Vector
from agent.memory.units import Known, KnownFact
from agent.search.embeddings import Embedder
from db.models import UserFact
from db.repositories.graph_work import forget_shown, record_shown, unshown_facts

logger = logging.getLogger(__name__)

# How each group reads in the prompt: the model must tell what it knows about the person from what
# happened between them and from its own (the persona's) life.
_LABELS = {"user": "", "relationship": "together: ", "persona": "your own life: "}


def fact_line(fact: EdgeFact) -> str:
    """One graph fact as a prompt line, with its group and the day it became true."""
    since = f" (since {fact.valid_at.date().isoformat()})" if fact.valid_at is not None else ""
    return f"{_LABELS[fact.group]}{fact.text}{since}"


def listed(fact: UserFact) -> ListedFact:
    """A row of the list as the graph takes it."""
    messages = tuple(int(m) for m in fact.message_ids or ())
    return ListedFact(fact.id, fact.content, ensure_utc(fact.created_at), messages)


def through_list(
    found: Iterable[EdgeFact], known: Known, keep: Callable[[KnownFact], bool]
) -> tuple[list[KnownFact], list[EdgeFact]]:
    """What the graph found, read through the list: the held facts its user-group edges point back
    to (in the graph's order, each once, those `keep` takes), and the other groups' facts."""
    by_id = {fact.id: fact for fact in known.facts}
    listed_facts: dict[int, KnownFact] = {}
    others: list[EdgeFact] = []
    for edge in found:
        if edge.group != "user":
            others.append(edge)
            continue
        for fact_id in edge.fact_ids:
            fact = by_id.get(fact_id)
            if fact is not None and keep(fact):
                listed_facts.setdefault(fact_id, fact)
    return list(listed_facts.values()), others


async def show(
    graph: KnowledgeGraph, user_id: int, facts: Sequence[UserFact], *, now: datetime
) -> dict[int, str | None]:
    """Make the user group show these facts as the list holds them (db/repositories/graph_work.py's
    `unshown_facts`): the episodes of facts taken back or reworded leave their edges first (ended
    when the fact was, a reworded one now), then held facts are written with their present words.
    What the graph now shows of each fact (its key, or None)."""
    ends: dict[datetime, list[int]] = {}
    for fact in facts:
        if fact.graph_key is not None:
            ended = ensure_utc(fact.invalidated_at) if fact.invalidated_at is not None else now
            ends.setdefault(ended, []).append(fact.id)
    for at, ids in sorted(ends.items()):
        await graph.end_facts(user_id, ids, at)
    held = [fact for fact in facts if fact.invalidated_at is None]
    await graph.add_facts(user_id, [listed(fact) for fact in held])
    shown: dict[int, str | None] = {fact.id: None for fact in facts}
    shown.update({fact.id: fact.dedupe_key for fact in held})
    return shown


class GraphFacts:
    """The graph's side of the one list: its relation facts for a query, and a person's graph
    written again from the list."""

    def __init__(
        self,
        graph: KnowledgeGraph,
        *,
        clock: Clock,
        timeout_seconds: float,
        sessions: async_sessionmaker[AsyncSession] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.graph = graph
        # The embedder the graph was opened with, when known: a query embedded by it is not
        # embedded again by the graph.
        self.embedder = embedder
        self.clock = clock
        self.timeout_seconds = timeout_seconds
        # Where a rebuild reads the list.
        self.sessions = sessions

    async def search(
        self, user_id: int, query: str, *, limits: GroupLimits, now: datetime, vector: Vector | None = None
    ) -> GraphResults:
        """The groups' current facts for the query, in parallel; `GraphError` when the graph
        fails or takes longer than the timeout. `vector`: the query embedded by `embedder`."""
        try:
            async with asyncio.timeout(self.timeout_seconds):
                results = await self.graph.search(user_id, query, limits=limits, now=now, vector=vector)
        except TimeoutError as exc:
            raise GraphError(f"graph search timed out after {self.timeout_seconds:g} s") from exc
        # The graph filters superseded facts already; checking again keeps "current only" a property
        # of this enrichment whatever backend answers.
        return GraphResults(
            user=[f for f in results.user if f.is_current(now)],
            relationship=[f for f in results.relationship if f.is_current(now)],
            persona=[f for f in results.persona if f.is_current(now)],
        )

    async def rebuild(self, user_id: int) -> int:
        """The person's graph written again from the list: their groups cleared, every held fact
        added (each pointing back to it and its messages); how many facts. Needs `sessions`."""
        assert self.sessions is not None, "rebuilding reads the list"
        await self.graph.forget_user(user_id)
        async with self.sessions() as session, session.begin():
            await forget_shown(session, user_id)
            unshown = await unshown_facts(session, user_id)
        shown = await show(self.graph, user_id, unshown, now=self.clock.now())
        async with self.sessions() as session, session.begin():
            await record_shown(session, user_id, shown)
        written = sum(key is not None for key in shown.values())
        logger.info("graph rebuilt from the list", extra={"user_id": user_id, "facts": written})
        return written
