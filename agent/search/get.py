"""`conversation_get`: exact messages by id or range, or a day's summary; one user only."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.errors import RecallInputError, RecallNotFoundError
from db.models import DaySegment, TranscriptMessage


@dataclass(frozen=True)
class MessageOut:
    """One transcript message, exactly as stored."""

    message_id: int
    role: str
    content: str
    created_at: str
    day_segment_id: int | None
    # Who said it in a group chat; None in a private chat (and then left out of `shown`).
    speaker: str | None = None

    def shown(self) -> dict[str, object]:
        """The message as a tool or page shows it: a private chat's without a speaker field."""
        out = asdict(self)
        if self.speaker is None:
            del out["speaker"]
        return out


@dataclass(frozen=True)
class MessagesOut:
    """An ordered run of messages; `truncated` when the range held more than the cap."""

    messages: list[MessageOut]
    truncated: bool = False


@dataclass(frozen=True)
class SummaryOut:
    """A day's summary, plus the day's message id range for a follow-up range request."""

    day_segment_id: int
    day_label: str
    summary_markdown: str | None
    updated_at: str | None
    first_message_id: int | None
    last_message_id: int | None
    message_count: int


def _out(message: TranscriptMessage) -> MessageOut:
    return MessageOut(
        message_id=message.id,
        role=message.role,
        content=message.content,
        created_at=message.sent_at.isoformat(timespec="seconds"),
        day_segment_id=message.day_segment_id,
        speaker=message.speaker_name,
    )


async def get_message(session: AsyncSession, user_id: int, message_id: int) -> MessagesOut:
    """One message of this user."""
    message = await session.scalar(
        select(TranscriptMessage).where(
            TranscriptMessage.id == message_id, TranscriptMessage.user_id == user_id
        )
    )
    if message is None:
        raise RecallNotFoundError(f"no message with id {message_id}")
    return MessagesOut([_out(message)])


async def _segment(session: AsyncSession, user_id: int, day_segment_id: int) -> DaySegment:
    segment = await session.scalar(
        select(DaySegment).where(DaySegment.id == day_segment_id, DaySegment.user_id == user_id)
    )
    if segment is None:
        raise RecallNotFoundError(f"no day segment with id {day_segment_id}")
    return segment


async def get_day_summary(session: AsyncSession, user_id: int, day_segment_id: int) -> SummaryOut:
    """A day segment of this user: its summary (None when not written yet) and message range."""
    segment = await _segment(session, user_id, day_segment_id)
    return SummaryOut(
        day_segment_id=segment.id,
        day_label=segment.day.isoformat(),
        summary_markdown=segment.summary,
        updated_at=segment.summary_updated_at.isoformat(timespec="seconds")
        if segment.summary_updated_at
        else None,
        first_message_id=segment.first_message_id,
        last_message_id=segment.last_message_id,
        message_count=segment.message_count,
    )


async def get_range(
    session: AsyncSession,
    user_id: int,
    day_segment_id: int,
    from_message_id: int,
    to_message_id: int,
    *,
    max_messages: int,
) -> MessagesOut:
    """This user's messages of one day segment with ids in [from, to], oldest first, capped."""
    if from_message_id > to_message_id:
        raise RecallInputError("from_message_id must not be greater than to_message_id")
    await _segment(session, user_id, day_segment_id)
    rows = (
        await session.execute(
            select(TranscriptMessage)
            .where(
                TranscriptMessage.user_id == user_id,
                TranscriptMessage.day_segment_id == day_segment_id,
                TranscriptMessage.id >= from_message_id,
                TranscriptMessage.id <= to_message_id,
            )
            .order_by(TranscriptMessage.id)
            .limit(max_messages + 1)
        )
    ).scalars()
    messages = [_out(m) for m in rows]
    return MessagesOut(messages[:max_messages], truncated=len(messages) > max_messages)
