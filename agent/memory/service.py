"""`Facts`: what the bot knows about a person or a group, behind one interface.

The facts are one list (`user_facts`, read and changed through `FactRepository`). This service
serves it to every reader the same way: the facts found for a message (the turn's note),
`memory_search`, `memory_add`, taking facts back and correcting them. Both rank the
list the transcript's way (agent/memory/ranking.py: full text in the person's language, vectors when
an embedder is on). With a graph on, it is searched beside the list and what it finds counts
through the list's facts its edges point back to (agent/memory/graph.py); a forget or a correction
changes the list, its search rows and this process's caches at once, and the graph follows the list
in the background (jobs/graph.py). The
profile is chosen from the same list (agent/memory/profile.py). Every call is scoped to one owner id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from agent.core.errors import (
    EmbedderUnavailableError,
    GraphError,
    GraphOpeningError,
    UserForgottenError,
)
from agent.core.settings import Settings
from agent.graph.base import EdgeFact, GroupLimits
from agent.memory.corrections import Matched, end_facts, named_by
from agent.memory.facts import FactAdded, FactHit
from agent.memory.graph import GraphFacts, fact_line, through_list
from agent.memory.grounding import dropped, ground_in_turn
from agent.memory.ranking import Scored, cosines, rank_facts
from agent.memory.units import FactUnits, Known
from agent.search.recall import Recall
from db.repositories.dedupe import normalise_fact
from db.repositories.facts import FactRepository
from db.repositories.users import user_present

logger = logging.getLogger(__name__)

# How long finding a message's facts waits for the search index to catch up with new facts; past it, the
# facts not embedded yet rank by full text and the catch-up goes on in the background.
CATCH_UP_SECONDS = 0.5


class Limits(Protocol):
    """How many facts to find: from the list (`user`), and the graph's other two groups."""

    @property
    def user(self) -> int: ...
    @property
    def relationship(self) -> int: ...
    @property
    def persona(self) -> int: ...


def found_line(scored: Scored) -> str:
    """One fact of the list as the turn's note shows it (a plan with its date)."""
    until = scored.fact.valid_until
    return scored.fact.content + (f" (planned for {until.date().isoformat()})" if until is not None else "")


class Facts:
    """The one list of facts, found, searched, added to and corrected the same way everywhere."""

    def __init__(
        self, settings: Settings, recall: Recall, *, units: FactUnits, graph: GraphFacts | None = None
    ) -> None:
        self.settings = settings
        self.index = recall
        self.sessions = recall.sessions
        self.units = units
        # The knowledge graph's relation facts, when GRAPH_BACKEND is on.
        self.graph = graph

    @classmethod
    def over(cls, settings: Settings, recall: Recall, *, graph: GraphFacts | None = None) -> Facts:
        """The facts served over this search index (and its fact units, or units of their own)."""
        units = recall.units if isinstance(recall.units, FactUnits) else FactUnits.from_settings(settings)
        return cls(settings, recall, units=units, graph=graph)

    # --- reading ----------------------------------------------------------------------------------

    async def _found(
        self,
        user_id: int,
        query: str,
        *,
        limit: int,
        hidden: bool,
        exclude: frozenset[int],
        graph_limits: GroupLimits,
        now: datetime,
    ) -> tuple[list[Scored], list[Scored], list[EdgeFact]]:
        """The owner's facts for the query (hidden ones too when `hidden`), best first; the held facts
        the graph found beyond them; and the graph's other groups' facts: the query embedded once, the
        list and the graph searched side by side."""
        vector = await self._query_vector(user_id, query)
        (known, ranked), found = await asyncio.gather(
            self._ranked(user_id, query, vector, limit=limit, hidden=hidden, exclude=exclude, now=now),
            self._graph_search(user_id, query, vector, limits=graph_limits, now=now),
        )
        taken = {s.fact.id for s in ranked} | exclude
        by_graph, others = through_list(
            found, known, lambda f: (hidden or not f.hidden) and f.id not in taken
        )
        return ranked, [Scored(f, 0.0) for f in by_graph], others

    async def _ranked(
        self,
        user_id: int,
        query: str,
        vector: npt.NDArray[np.float32] | None,
        *,
        limit: int,
        hidden: bool,
        exclude: frozenset[int],
        now: datetime,
    ) -> tuple[Known, list[Scored]]:
        """The list ranked for the query: its words in the person's language, and its vectors.

        One statement says whether the list or its vectors moved (the person's language with them);
        facts new since the last recall are embedded first (waiting a moment at most), so a fact
        just learned is ranked by its meaning too.
        """
        embedder, units = self.index.embedder, self.units
        for attempt in (1, 2):
            async with self.sessions() as session:
                state = await units.state(session, user_id, embedder)
                if attempt == 2 or units.caught_up(user_id, state.version):
                    known = await units.known(session, user_id, state.language, version=state.version)
                    cosine = None
                    if vector is not None and embedder is not None:
                        found = await units.vectors(session, user_id, embedder, version=state.vectors)
                        cosine = cosines(found, vector)
                    break
            await self.index.catch_up_facts(user_id, now=now, wait_seconds=CATCH_UP_SECONDS)
            units.mark_caught_up(user_id, state.version)
        ranked = rank_facts(
            known,
            query,
            cosine=cosine,
            weights=self.index.ranking.weights(cosine is not None),
            keep=lambda f: (hidden or not f.hidden) and f.id not in exclude,
            limit=limit,
        )
        return known, ranked

    async def _query_vector(self, user_id: int, query: str) -> npt.NDArray[np.float32] | None:
        embedder = self.index.embedder
        if embedder is None or not query.strip():
            return None
        try:
            async with asyncio.timeout(self.settings.embedder_search_timeout_seconds):
                vectors = await embedder.embed([query], input_type="query")
        except (EmbedderUnavailableError, TimeoutError) as exc:
            logger.warning(
                "fact query embedding failed; full text only", extra={"user_id": user_id}, exc_info=exc
            )
            return None
        return np.asarray(vectors[0], dtype=np.float32)

    async def _graph_search(
        self,
        user_id: int,
        query: str,
        vector: npt.NDArray[np.float32] | None,
        *,
        limits: GroupLimits,
        now: datetime,
    ) -> list[EdgeFact]:
        """The graph's current facts for the query; none when it is off or failing."""
        if self.graph is None:
            return []
        # The query's vector serves the graph too when the graph embeds with the same model.
        same = self.graph.embedder is not None and self.graph.embedder is self.index.embedder
        shared = [float(value) for value in vector] if vector is not None and same else None
        try:
            found = await self.graph.search(user_id, query, limits=limits, now=now, vector=shared)
        except GraphOpeningError:
            return []  # the first seconds after a start: no graph facts yet, and nothing failed
        except GraphError as exc:
            # A memory failure degrades the context, never the reply: the list answers alone.
            logger.warning("graph facts unavailable", extra={"user_id": user_id, "error": str(exc)[:200]})
            return []
        return found.all()

    async def for_message(
        self,
        user_id: int,
        query: str,
        *,
        limits: Limits,
        now: datetime,
        exclude: frozenset[int] = frozenset(),
    ) -> list[str]:
        """The facts relevant to a message, as lines for the turn's note: from the list (never a
        hidden one, nor one in `exclude`, the profile's), then the graph's that add to it."""
        ranked, by_graph, others = await self._found(
            user_id,
            query,
            limit=limits.user,
            hidden=False,
            exclude=exclude,
            graph_limits=GroupLimits(
                user=limits.user, relationship=limits.relationship, persona=limits.persona
            ),
            now=now,
        )
        return [found_line(s) for s in [*ranked, *by_graph]] + [fact_line(f) for f in others]

    async def search(self, user_id: int, query: str, *, limit: int, now: datetime) -> list[FactHit]:
        """memory_search: the facts matching the query, hidden ones too (the person asked), then the
        graph's that add to them; the newest facts when the query is empty."""
        if not query.strip():
            async with self.sessions() as session:
                newest = await FactRepository(session).held(user_id, newest_first=True, limit=limit)
            return [
                FactHit(f.id, f.content, f.source, f.created_at.isoformat(timespec="minutes"), 0.0)
                for f in newest
            ]
        ranked, by_graph, others = await self._found(
            user_id,
            query,
            limit=limit,
            hidden=True,
            exclude=frozenset(),
            graph_limits=GroupLimits(user=limit, relationship=max(1, limit // 2), persona=0),
            now=now,
        )
        extra = [(f"graph:{f.group}", f.valid_at, 0, f.text) for f in others]
        extra[:0] = [("graph:user", s.fact.created_at, s.fact.id, s.fact.content) for s in by_graph]
        # The graph's finds keep a share of the places: the list would fill them all otherwise.
        room = max(limit - len(ranked), min(len(extra), max(1, limit // 4)))
        hits = [
            FactHit(
                s.fact.id, s.fact.content, "saved", s.fact.created_at.isoformat(timespec="minutes"), s.score
            )
            for s in ranked[: limit - min(room, len(extra))]
        ]
        for rank, (source, since, fact_id, text) in enumerate(extra[:room], start=1):
            day = since.isoformat(timespec="minutes") if since is not None else ""
            hits.append(FactHit(fact_id, text, source, day, round(1.0 / rank, 3)))
        return hits

    # --- changing ---------------------------------------------------------------------------------

    async def grounded(
        self, user_id: int, content: str, *, conversation_id: int, message_id: int | None
    ) -> tuple[int, ...] | None:
        """The sources of a fact a tool writes on the person's behalf: their message this turn
        answers (agent/memory/grounding.py); None, counted, when it is not theirs."""
        async with self.sessions() as session:
            found = await ground_in_turn(session, user_id, conversation_id, message_id, content)
        if found.reason is not None:
            dropped([found.reason], writer="tool", owner_id=user_id, conversation_id=conversation_id)
            return None
        return found.message_ids

    async def add(
        self,
        user_id: int,
        content: str,
        *,
        conversation_id: int | None,
        at: datetime,
        source: str = "tool",
        category: str | None = None,
        message_ids: Sequence[int] = (),
    ) -> FactAdded:
        """Save one fact (the same fact again reinforces its row; one the person took back is held
        again, since they say it now); the graph follows from the list (jobs/graph.py)."""
        content = content.strip()
        async with self.sessions() as session, session.begin():
            if not await user_present(session, user_id):
                raise UserForgottenError(f"user {user_id} was forgotten")
            repository = FactRepository(session)
            created = await repository.add_sourced(
                user_id, conversation_id, [(content, message_ids)], at, source=source, category=category
            )
            fact = await repository.by_content(user_id, content)
            assert fact is not None  # just inserted or already there, in the same transaction
            if fact.invalidated_at is not None:
                await repository.revive(user_id, [fact.id], at)
            fact_id, text = fact.id, fact.content
        return FactAdded(fact_id, text, created > 0)

    async def _named(self, user_id: int, sentence: str) -> list[Matched]:
        """The held facts a sentence names."""
        async with self.sessions() as session:
            return named_by(sentence, await FactRepository(session).held(user_id))

    async def _end(
        self,
        user_id: int,
        matched: Sequence[Matched],
        *,
        reason: str,
        at: datetime,
        superseded_by: int | None = None,
    ) -> int:
        """End the matched facts in the list; reads leave them out at once, and the graph's edges
        standing on them alone end when the graph follows (jobs/graph.py)."""
        ids = [m.fact_id for m in matched if m.fact_id is not None and m.fact_id != superseded_by]
        async with self.sessions() as session, session.begin():
            ended = await end_facts(
                session, self.units, user_id, ids, reason=reason, at=at, superseded_by=superseded_by
            )
        self.changed(user_id)
        logger.info("facts taken back", extra={"user_id": user_id, "facts": ended})
        return ended

    async def take_back(self, user_id: int, sentence: str, *, reason: str, at: datetime) -> list[str]:
        """Forget the facts a sentence names ("has a cat"); what they said (each once)."""
        matched = await self._named(user_id, sentence)
        if matched:
            await self._end(user_id, matched, reason=reason, at=at)
        return list(dict.fromkeys(m.text for m in matched))

    async def correct(
        self,
        user_id: int,
        wrong: str,
        right: str,
        *,
        conversation_id: int | None,
        at: datetime,
        message_ids: Sequence[int] = (),
    ) -> tuple[list[str], FactAdded]:
        """Replace the facts `wrong` names by `right`: saved, and the old ones superseded by it (kept,
        with when and why) and their edges ended."""
        matched = [
            m for m in await self._named(user_id, wrong) if normalise_fact(m.text) != normalise_fact(right)
        ]
        added = await self.add(
            user_id, right, conversation_id=conversation_id, at=at, message_ids=message_ids
        )
        if matched:
            await self._end(
                user_id, matched, reason=f"corrected: {right}", at=at, superseded_by=added.fact_id
            )
        return list(dict.fromkeys(m.text for m in matched)), added

    async def forget_fact(self, user_id: int, fact_id: int, *, reason: str, at: datetime) -> str | None:
        """Take back one held fact of the person (and the graph's edges standing on it); its text, or
        None when the person holds no such fact."""
        async with self.sessions() as session:
            fact = await FactRepository(session).held_one(user_id, fact_id)
            content = fact.content if fact is not None else None
        if content is None:
            return None
        await self._end(user_id, [Matched(content, fact_id=fact_id)], reason=reason, at=at)
        return content

    def changed(self, user_id: int) -> None:
        """The person's facts changed in place (reworded, pinned, hidden, taken back): what this
        process holds of them is read again, and the next index pass embeds them again."""
        self.index.units_changed(user_id)
