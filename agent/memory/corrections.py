"""Taking back one memory: find the facts a sentence names, end them with the time and the reason,
and keep post-processing from learning them again from the same old messages.

A fact taken back is not deleted: its `user_facts` row keeps `invalidated_at` and `invalid_reason`
and every read of held facts leaves it out (the profile, recall, memory_search, conversation_search's
fact units, /memory); its search row goes, and with a graph on the edges that say it get their end
time, so every place changes at once. The transcript stays what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.memory.units import FactUnits, fact_digest
from agent.memory.words import SAME_SHARE, similarity
from db.models import TranscriptMessage, UserFact
from db.repositories.dedupe import fact_dedupe_key
from db.repositories.facts import FactRepository

logger = logging.getLogger(__name__)

MAX_MATCHES = 5


@dataclass(frozen=True)
class Matched:
    """A held fact a sentence names."""

    text: str
    fact_id: int | None = None


def named_by(sentence: str, facts: Sequence[UserFact]) -> list[Matched]:
    """The held facts the sentence names ("lives in Lisbon" names "Ana lives in Lisbon", and "Ana lives
    in Lisbon" does not name "Ana lives in Porto"), best first."""
    scored = [(similarity(sentence, f.content), Matched(f.content, fact_id=f.id)) for f in facts]
    scored = [(score, match) for score, match in scored if score >= SAME_SHARE]
    scored.sort(key=lambda pair: -pair[0])
    return [match for _, match in scored[:MAX_MATCHES]]


async def end_facts(
    session: AsyncSession,
    units: FactUnits,
    owner_id: int,
    fact_ids: Sequence[int],
    *,
    reason: str,
    at: datetime,
    superseded_by: int | None = None,
) -> int:
    """Take these held facts of the owner back (superseded by a newer fact, when given), with their
    search rows; how many (the caller commits)."""
    repository = FactRepository(session)
    facts = [f for i in dict.fromkeys(fact_ids) if (f := await repository.held_one(owner_id, i)) is not None]
    if not facts:
        return 0
    digests = [fact_digest(f.id, f.content, sorted({int(m) for m in f.message_ids or []})) for f in facts]
    ids = [f.id for f in facts]
    if superseded_by is None:
        ended = await repository.invalidate(owner_id, ids, at, reason=reason)
    else:
        ended = await repository.supersede(owner_id, ids, by=superseded_by, at=at, reason=reason)
    # The fact's own search vector goes with it; its source messages stay searchable as words.
    await units.drop(session, owner_id, digests)
    return ended


async def without_taken_back(
    session: AsyncSession, owner_id: int, facts: Sequence[tuple[str, Sequence[int]]], *, at: datetime
) -> list[int]:
    """The positions of the extracted facts to keep: those the owner took back and that were learned
    again from messages sent before they took them back (the same old messages) are dropped. Said again
    since, a fact is held again."""
    taken_back = await FactRepository(session).taken_back(owner_id)
    if not taken_back:
        return list(range(len(facts)))
    kept: list[int] = []
    revived: list[int] = []
    for position, (content, message_ids) in enumerate(facts):
        key = fact_dedupe_key(content)
        alike = [
            t
            for t in taken_back
            if t.dedupe_key == key
            or max(similarity(t.content, content), similarity(content, t.content)) >= SAME_SHARE
        ]
        if not alike:
            kept.append(position)
            continue
        newest = None
        if message_ids:
            newest = await session.scalar(
                select(func.max(TranscriptMessage.sent_at)).where(
                    TranscriptMessage.user_id == owner_id, TranscriptMessage.id.in_(list(message_ids))
                )
            )
        if newest is None or all(newest < t.invalidated_at for t in alike if t.invalidated_at is not None):
            continue
        kept.append(position)
        revived += [t.id for t in alike if t.dedupe_key == key]
    await FactRepository(session).revive(owner_id, revived, at)
    return kept
