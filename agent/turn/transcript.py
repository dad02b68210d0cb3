"""The one writer of transcript rows: every message a user sends or the bot answers is stored here.

Every turn (chat, onboarding, short answers, voice calls) writes through `write_message`, inside
its turn's transaction: the row goes into the day segment of its local calendar day (opened by the
first message of that day), and a user's message carries its Telegram id, by which a repeated
delivery is found (`find_repeat`) and, should two repeats race, refused by the database's unique
index.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.clock import local_day
from db.models import TranscriptMessage, User
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.transcript import TranscriptRepository


class TurnReceipt(Protocol):
    """Runs inside the transaction that stores a turn's answer (a raise rolls the turn back)."""

    async def __call__(self, session: AsyncSession, answer: str) -> None:
        """Record, with the answer, whatever the caller needs to deliver it exactly once."""
        ...


@dataclass(frozen=True)
class Speaker:
    """Who said a group chat's message: their Telegram id (None for a chat speaking as itself) and name."""

    telegram_id: int | None
    name: str


@dataclass(frozen=True)
class Repeat:
    """A user's message stored before, and the answer to it if one was stored."""

    message: TranscriptMessage
    answer: TranscriptMessage | None


async def find_repeat(session: AsyncSession, user_id: int, telegram_message_id: int | None) -> Repeat | None:
    """The message with this Telegram id if it was stored already (a repeat), else None."""
    if telegram_message_id is None:
        return None
    transcript = TranscriptRepository(session)
    message = await transcript.by_telegram_id(user_id, telegram_message_id)
    if message is None:
        return None
    return Repeat(message, await transcript.reply_to(message.id))


async def write_message(
    session: AsyncSession,
    user: User,
    *,
    role: str,
    content: str,
    sent_at: datetime,
    kind: str = "text",
    conversation_id: int | None = None,
    telegram_message_id: int | None = None,
    reply_to_id: int | None = None,
    in_day: bool = True,
    speaker: Speaker | None = None,
) -> TranscriptMessage:
    """Store one message in the caller's transaction and count it into its day.

    `in_day=False` keeps the row out of the day segments (onboarding's exchange, which is not part
    of the user's days). `speaker`: who said a group chat's message. Raises `IntegrityError` at
    flush when the Telegram id is stored already.
    """
    segment = (
        await DaySegmentRepository(session).open(
            user.id, local_day(sent_at, user.timezone), user.timezone, sent_at
        )
        if in_day
        else None
    )
    row = await TranscriptRepository(session).add(
        user_id=user.id,
        conversation_id=conversation_id,
        role=role,
        kind=kind,
        content=content,
        sent_at=sent_at,
        telegram_message_id=telegram_message_id,
        reply_to_id=reply_to_id,
        day_segment_id=segment.id if segment is not None else None,
        speaker_telegram_id=speaker.telegram_id if speaker is not None else None,
        speaker_name=speaker.name if speaker is not None else None,
    )
    if segment is not None:
        DaySegmentRepository.record_message(segment, row.id, sent_at)
    return row
