"""Taking back one memory: find the facts a sentence names, end them with the time and the reason,
store the correction as a new fact, and keep post-processing from learning them again.

A fact taken back is not deleted: its `user_facts` row keeps `invalidated_at` and `invalid_reason`
and every read leaves it out (memory_search, conversation_search's fact keys and fact vectors,
/memory); the graph's edges get their end time (`invalid_at`, `expired_at`), so the memory tier
and the graph's searches leave them out at once. The transcript stays what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.graph.errors import GraphMemoryError
from agent.graph.memory import GraphMemory, GroupLimits
from agent.search.fact_units import KIND_FACT_CHUNK, fact_digest
from agent.search.facts import stem
from agent.search.fts import query_terms
from db.models import SearchChunk, TranscriptMessage, UserFact
from db.repositories.dedupe import fact_dedupe_key

logger = logging.getLogger(__name__)

# The share of the sentence's words a fact must hold to be the one it names ("lives in Lisbon" names
# "Ana lives in Lisbon", and "Ana lives in Lisbon" does not name "Ana lives in Porto").
MATCH_SHARE = 0.75
MAX_MATCHES = 5
# The Mini App's page lists at most this many facts (a user has hundreds at most).
MAX_REMEMBERED = 500


@dataclass(frozen=True)
class Matched:
    """A remembered fact a sentence names: a `user_facts` row (`fact_id`) or a graph edge (`uuid`)."""

    text: str
    fact_id: int | None = None
    uuid: str | None = None


def _words(text: str) -> set[str]:
    return {stem(word) for word in query_terms(text)}


def similarity(sentence: str, fact: str) -> float:
    """The share of the sentence's words the fact holds (stemmed)."""
    wanted = _words(sentence)
    return len(wanted & _words(fact)) / len(wanted) if wanted else 0.0


async def find_facts(
    sessions: async_sessionmaker[AsyncSession],
    graph: GraphMemory | None,
    user_id: int,
    sentence: str,
    *,
    now: datetime,
) -> list[Matched]:
    """The user's current facts (saved and in the graph) that the sentence names, best first."""
    async with sessions() as session:
        rows = (
            await session.execute(
                select(UserFact.id, UserFact.content).where(
                    UserFact.user_id == user_id, UserFact.invalidated_at.is_(None)
                )
            )
        ).all()
    scored = [(similarity(sentence, content), Matched(content, fact_id=int(i))) for i, content in rows]
    if graph is not None:
        try:
            found = await graph.search(
                user_id, sentence, limits=GroupLimits(user=10, relationship=5, persona=0), now=now
            )
        except GraphMemoryError as exc:
            logger.warning(
                "graph search for facts to take back failed", extra={"user_id": user_id}, exc_info=exc
            )
        else:
            scored += [
                (similarity(sentence, f.text), Matched(f.text, uuid=f.uuid)) for f in found.all() if f.uuid
            ]
    scored = [(score, match) for score, match in scored if score >= MATCH_SHARE]
    scored.sort(key=lambda pair: -pair[0])
    return [match for _, match in scored[:MAX_MATCHES]]


async def invalidate(
    sessions: async_sessionmaker[AsyncSession],
    graph: GraphMemory | None,
    user_id: int,
    matched: Sequence[Matched],
    *,
    reason: str,
    at: datetime,
) -> int:
    """End these facts of the user with the time and the reason; how many were ended."""
    fact_ids = [m.fact_id for m in matched if m.fact_id is not None]
    ended = 0
    if fact_ids:
        async with sessions() as session, session.begin():
            facts = (
                (
                    await session.execute(
                        select(UserFact).where(
                            UserFact.user_id == user_id,
                            UserFact.id.in_(fact_ids),
                            UserFact.invalidated_at.is_(None),
                        )
                    )
                )
                .scalars()
                .all()
            )
            for fact in facts:
                fact.invalidated_at, fact.invalid_reason = at, reason[:2000]
            # The fact's own search vector goes with it; its source messages stay searchable as words.
            digests = [
                fact_digest(f.id, f.content, sorted({int(m) for m in f.message_ids or []})) for f in facts
            ]
            if digests:
                await session.execute(
                    delete(SearchChunk).where(
                        SearchChunk.user_id == user_id,
                        SearchChunk.kind == KIND_FACT_CHUNK,
                        SearchChunk.digest.in_(digests),
                    )
                )
            ended += len(facts)
    uuids = [m.uuid for m in matched if m.uuid]
    if graph is not None and uuids:
        ended += await graph.invalidate_facts(user_id, uuids, at)
    logger.info("facts taken back", extra={"user_id": user_id, "facts": ended})
    return ended


async def without_taken_back(
    session: AsyncSession, user_id: int, facts: Sequence[tuple[str, Sequence[int]]]
) -> list[tuple[str, Sequence[int]]]:
    """The extracted facts minus those the user took back, learned again from messages sent before
    they took them back (the same old messages). Said again since, a fact is held again."""
    taken_back = (
        await session.execute(
            select(UserFact.id, UserFact.content, UserFact.dedupe_key, UserFact.invalidated_at).where(
                UserFact.user_id == user_id, UserFact.invalidated_at.is_not(None)
            )
        )
    ).all()
    if not taken_back:
        return list(facts)
    kept: list[tuple[str, Sequence[int]]] = []
    revived: list[int] = []
    for content, message_ids in facts:
        key = fact_dedupe_key(content)
        alike = [
            t
            for t in taken_back
            if t.dedupe_key == key
            or max(similarity(t.content, content), similarity(content, t.content)) >= MATCH_SHARE
        ]
        if not alike:
            kept.append((content, message_ids))
            continue
        newest = None
        if message_ids:
            newest = await session.scalar(
                select(func.max(TranscriptMessage.sent_at)).where(
                    TranscriptMessage.user_id == user_id, TranscriptMessage.id.in_(list(message_ids))
                )
            )
        if newest is None or all(newest < t.invalidated_at for t in alike):
            continue
        kept.append((content, message_ids))
        revived += [t.id for t in alike if t.dedupe_key == key]
    if revived:
        await session.execute(
            update(UserFact)
            .where(UserFact.user_id == user_id, UserFact.id.in_(revived))
            .values(invalidated_at=None, invalid_reason=None)
            .execution_options(synchronize_session=False)
        )
    return kept


@dataclass(frozen=True)
class FactsPage:
    """One page of the facts a user can see and take back (/memory, the Mini App)."""

    facts: list[UserFact]
    page: int
    pages: int


async def facts_page(session: AsyncSession, user_id: int, *, page: int, size: int) -> FactsPage:
    """The user's held facts, newest first, `size` a page; the page number is kept in range."""
    total = int(
        await session.scalar(
            select(func.count())
            .select_from(UserFact)
            .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
        )
        or 0
    )
    pages = max(1, -(-total // size))
    page = min(max(page, 1), pages)
    facts = (
        (
            await session.execute(
                select(UserFact)
                .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
                .order_by(UserFact.id.desc())
                .offset((page - 1) * size)
                .limit(size)
            )
        )
        .scalars()
        .all()
    )
    return FactsPage(list(facts), page, pages)


async def forget_fact(
    sessions: async_sessionmaker[AsyncSession],
    graph: GraphMemory | None,
    user_id: int,
    fact_id: int,
    *,
    reason: str,
    at: datetime,
) -> str | None:
    """Take back one saved fact of the user (and the graph's edges that say it); its text, or None
    when the user holds no such fact."""
    async with sessions() as session:
        content = await session.scalar(
            select(UserFact.content).where(
                UserFact.id == fact_id, UserFact.user_id == user_id, UserFact.invalidated_at.is_(None)
            )
        )
    if content is None:
        return None
    edges = [m for m in await find_facts(sessions, graph, user_id, content, now=at) if m.uuid]
    await invalidate(
        sessions, graph, user_id, [Matched(content, fact_id=fact_id), *edges], reason=reason, at=at
    )
    return content


@dataclass(frozen=True)
class Remembered:
    """A held fact as the user sees it: its kind and the local day it comes from."""

    id: int
    content: str
    kind: str
    day: str


# How each writer's facts are grouped when the writer named no category.
_KINDS = {
    "extraction": "from our conversations",
    "tool": "you asked me to remember",
    "voice": "from our calls",
}


async def remembered(session: AsyncSession, user_id: int, zone: ZoneInfo) -> list[Remembered]:
    """Every fact the user holds, newest first, with the local day of its first source message (or of
    when it was saved)."""
    facts = (
        (
            await session.execute(
                select(UserFact)
                .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
                .order_by(UserFact.id.desc())
                .limit(MAX_REMEMBERED)
            )
        )
        .scalars()
        .all()
    )
    wanted = {int(m) for f in facts for m in f.message_ids or []}
    sent = dict(
        (
            await session.execute(
                select(TranscriptMessage.id, TranscriptMessage.sent_at).where(
                    TranscriptMessage.user_id == user_id, TranscriptMessage.id.in_(wanted)
                )
            )
        ).all()
        if wanted
        else []
    )
    out = []
    for fact in facts:
        times = [sent[int(m)] for m in fact.message_ids or [] if int(m) in sent]
        at = min(times) if times else fact.created_at
        kind = fact.category or _KINDS.get(fact.source, fact.source)
        out.append(Remembered(fact.id, fact.content, kind, at.astimezone(zone).date().isoformat()))
    return out
