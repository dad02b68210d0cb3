"""The knowledge graph as a view of the rows it follows, never a second store.

With GRAPH_BACKEND set, the graph is searched beside the list, and what it finds in the user group
counts through the list's facts its edges point back to (agent/graph/view.py): a held fact the
list's own ranking missed joins the facts found for a message and those `memory_search` finds,
with the list's words; an edge whose facts the person took back or hid shows nothing. The shared
history (final days' key moments) and the persona's thoughts count through their rows the same
way: an edge whose row is gone or changed shows nothing. A row saved marks the person in the same
transaction; the `graph` job (jobs/graph.py) then makes the graph follow: new, reworded and revived
rows written, the edges of rows gone or reworded ended when no other row holds them up. `rebuild`
writes a person's graph again from the rows. A graph that is slow or failing is skipped: the list
answers alone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock, ensure_utc
from agent.core.errors import GraphError
from agent.graph.base import GROUPS, EdgeFact, GraphResults, GroupLimits, KnowledgeGraph, ListedFact, Vector
from agent.memory.units import Known, KnownFact
from agent.search.embeddings import Embedder
from db.repositories.graph_work import Due, forget_shown, record_shown, shown_ids
from db.repositories.graph_work import unshown as unshown_rows

logger = logging.getLogger(__name__)
# What the graph shows of each row it follows ((group, id): its words, or None).
Shown = dict[tuple[str, int], Any]

# How each group reads in the prompt: the model must tell what it knows about the person from what
# happened between them and from its own (the persona's) life.
_LABELS = {"user": "", "relationship": "together: ", "persona": "your own life: "}


def fact_line(fact: EdgeFact) -> str:
    """One graph fact as a prompt line, with its group and the day it became true."""
    since = f" (since {fact.valid_at.date().isoformat()})" if fact.valid_at is not None else ""
    return f"{_LABELS[fact.group]}{fact.text}{since}"


def listed(due: Due) -> ListedFact:
    """A row as the graph takes it: a fact, a final day's key moments (a line each), a thought."""
    row = due.row
    if due.group == "relationship":
        moments = [m.get("text") if isinstance(m, dict) else m for m in row.key_moments or ()]
        lines = [" ".join(m.split()) for m in moments if isinstance(m, str) and m.strip()]
        said = (m.get("message_id") for m in row.key_moments or () if isinstance(m, dict))
        messages = tuple(dict.fromkeys(int(m) for m in said if isinstance(m, int)))
        return ListedFact(row.id, "\n".join(lines), ensure_utc(row.last_message_at), messages)
    messages = tuple(int(m) for m in getattr(row, "message_ids", None) or ())
    return ListedFact(row.id, row.content, ensure_utc(row.created_at), messages)


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
        for fact_id in edge.row_ids:
            fact = by_id.get(fact_id)
            if fact is not None and keep(fact):
                listed_facts.setdefault(fact_id, fact)
    return list(listed_facts.values()), others


async def show(graph: KnowledgeGraph, user_id: int, rows: Sequence[Due], *, now: datetime) -> Shown:
    """Make each group show these rows as they stand (db/repositories/graph_work.py's `unshown`): the
    episodes of rows gone or changed leave their edges first (ended when the row was, else now),
    then held rows are written as they are. What the graph now shows of each (its words, or None)."""
    shown: Shown = {}
    for group in GROUPS:
        of_group = [due for due in rows if due.group == group]
        ends: dict[datetime, list[int]] = {}
        for due in of_group:
            if due.shown is not None:
                ended = ensure_utc(due.ended) if due.ended is not None and not due.held else now
                ends.setdefault(ended, []).append(due.row.id)
        for at, ids in sorted(ends.items()):
            await graph.end_facts(user_id, ids, at, group)
        held = [due for due in of_group if due.held]
        await graph.add_facts(user_id, [listed(due) for due in held], group)
        shown.update({(group, due.row.id): due.words if due.held else None for due in of_group})
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
        found = {group: [f for f in results.of(group) if f.is_current(now)] for group in GROUPS}
        others = [group for group in GROUPS[1:] if found[group]]
        if self.sessions is not None and others:
            # The user group counts through the list (`through_list`); the others through their rows:
            # an edge shows only while a row it comes from is as the graph shows it.
            async with self.sessions() as session:
                for group in others:
                    ids = (i for f in found[group] for i in f.row_ids)
                    rows = await shown_ids(session, user_id, group, ids)
                    found[group] = [f for f in found[group] if rows.intersection(f.row_ids)]
        return GraphResults(**found)

    async def rebuild(self, user_id: int) -> int:
        """The person's graph written again from its rows: their groups cleared, every held fact,
        final day's key moments and thought added (each pointing back to its row and messages); how
        many rows. Needs `sessions`."""
        assert self.sessions is not None, "rebuilding reads the rows"
        await self.graph.forget_user(user_id)
        async with self.sessions() as session, session.begin():
            await forget_shown(session, user_id)
            unshown = await unshown_rows(session, user_id)
        shown = await show(self.graph, user_id, unshown, now=self.clock.now())
        async with self.sessions() as session, session.begin():
            await record_shown(session, user_id, shown)
        written = sum(key is not None for key in shown.values())
        logger.info("graph rebuilt from its rows", extra={"user_id": user_id, "rows": written})
        return written
