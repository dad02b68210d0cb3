"""What the `retention` job reads and writes: old context snapshots, their text, the turn roll-up.

Every method is one short statement; the job gives each batch its own transaction, so no lock a
turn waits on is held for long. The caller commits.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import Exists, Text, cast, delete, exists, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db.models import Conversation, GeneratedPrompt, TurnDay

_Newer = aliased(GeneratedPrompt)


def day_start(day: date) -> datetime:
    """The first instant of a UTC day."""
    return datetime.combine(day, time(), tzinfo=UTC)


def _newer_of_person() -> Exists:
    return exists().where(_Newer.user_id == GeneratedPrompt.user_id, _Newer.id > GeneratedPrompt.id)


class RetentionRepository:
    """Snapshot pruning and slimming, and the daily turn roll-up."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def last_rolled_day(self) -> date | None:
        """The newest day the roll-up holds."""
        return await self.session.scalar(select(func.max(TurnDay.day)))

    async def first_snapshot_at(self) -> datetime | None:
        """When the oldest snapshot kept was taken."""
        return await self.session.scalar(select(func.min(GeneratedPrompt.created_at)))

    async def answered_ms(self, day: date) -> list[float | None]:
        """The time to an answer (None when not recorded) of every snapshot of one UTC day."""
        answered = GeneratedPrompt.context_snapshot["answered_ms"].as_float()
        start = day_start(day)
        rows = await self.session.execute(
            select(answered).where(
                GeneratedPrompt.created_at >= start, GeneratedPrompt.created_at < start + timedelta(days=1)
            )
        )
        return [None if ms is None else float(ms) for ms in rows.scalars()]

    def add_day(self, day: date, turns: int, timed: int, p95_ms: float | None) -> None:
        """Roll one day up (the caller commits; a day already rolled by another instance conflicts)."""
        self.session.add(TurnDay(day=day, turns=turns, timed=timed, p95_ms=p95_ms))

    async def prunable(
        self, cutoff: datetime, since: datetime | None, after_id: int, limit: int
    ) -> list[int]:
        """Ids of snapshots taken before `cutoff` (and from `since` on) that are neither their
        conversation's nor their person's newest, from `after_id` on, oldest first."""
        newer_in_conversation = exists().where(
            _Newer.conversation_id == GeneratedPrompt.conversation_id, _Newer.id > GeneratedPrompt.id
        )
        stmt = select(GeneratedPrompt.id).where(
            GeneratedPrompt.created_at < cutoff,
            GeneratedPrompt.id > after_id,
            _newer_of_person(),
            GeneratedPrompt.conversation_id.is_(None) | newer_in_conversation,
        )
        if since is not None:
            stmt = stmt.where(GeneratedPrompt.created_at >= since)
        return list((await self.session.execute(stmt.order_by(GeneratedPrompt.id).limit(limit))).scalars())

    async def delete(self, ids: Sequence[int]) -> int:
        """Delete these snapshots; how many were still there."""
        result = await self.session.execute(delete(GeneratedPrompt).where(GeneratedPrompt.id.in_(list(ids))))
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def wordy(self, since: datetime | None, after_id: int, limit: int) -> list[int]:
        """Ids of snapshots (taken from `since` on) that still hold their instructions text but are
        not their person's newest, from `after_id` on."""
        stmt = select(GeneratedPrompt.id).where(
            GeneratedPrompt.id > after_id, GeneratedPrompt.instructions != "", _newer_of_person()
        )
        if since is not None:
            stmt = stmt.where(GeneratedPrompt.created_at >= since)
        return list((await self.session.execute(stmt.order_by(GeneratedPrompt.id).limit(limit))).scalars())

    async def clear_instructions(self, ids: Sequence[int]) -> int:
        """Drop the instructions text of these snapshots (their counts and tiers stay)."""
        result = await self.session.execute(
            update(GeneratedPrompt).where(GeneratedPrompt.id.in_(list(ids))).values(instructions="")
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]

    async def ended_histories(
        self, cutoff: datetime, since: datetime | None, after_id: int, limit: int
    ) -> list[int]:
        """Ids of post-processed conversations whose last message came before `cutoff` (and from
        `since` on) that still hold their model history, from `after_id` on."""
        stmt = select(Conversation.id).where(
            Conversation.status == "processed",
            Conversation.last_message_at < cutoff,
            Conversation.id > after_id,
            cast(Conversation.messages, Text) != "[]",
        )
        if since is not None:
            stmt = stmt.where(Conversation.last_message_at >= since)
        return list((await self.session.execute(stmt.order_by(Conversation.id).limit(limit))).scalars())

    async def empty_histories(self, ids: Sequence[int]) -> int:
        """Empty the model history of these post-processed conversations (the transcript stays)."""
        result = await self.session.execute(
            update(Conversation)
            .where(Conversation.id.in_(list(ids)), Conversation.status == "processed")
            .values(messages=[])
        )
        return int(result.rowcount or 0)  # type: ignore[attr-defined]
