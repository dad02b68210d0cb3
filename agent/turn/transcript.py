"""What a turn is given, and the one writer of transcript rows: every message a user sends or the
bot answers is stored here.

Every turn starts from one `Incoming`: whose memory it is, the person as the caller read them, the
message, when it was sent and what the turn may write. Chat, group and onboarding turns store the
person's message with `store_said` and the answer with `store_answer`; every turn (short answers
and voice calls too) writes through `write_message`, inside its turn's transaction: the row goes
into the day segment of its local calendar day (opened by the first message of that day), and a
user's message carries its Telegram id, by which a repeated delivery is found (`find_repeat`) and,
should two repeats race, refused by the database's unique index.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import inspect, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.bounded import BoundedCache
from agent.core.clock import ensure_utc, local_day
from db.models import DaySegment, TranscriptMessage, User
from db.repositories.day_segments import Counted, DaySegmentRepository
from db.repositories.transcript import TranscriptRepository


@dataclass(frozen=True)
class Speaker:
    """Who said a group chat's message: their Telegram id (None for a chat speaking as itself) and name."""

    telegram_id: int | None
    name: str


@dataclass(frozen=True, kw_only=True)
class Incoming:
    """What every turn is given: whose memory, the person as read, the message, when, what it may write."""

    owner: int  # whose memory and turns: the person's user id, or a group's
    text: str  # the message as the transcript shows it ("[photo] caption" for a photo)
    sent_at: datetime
    kind: str = "text"
    telegram_message_id: int | None = None
    # The owner's row as the caller read it for this message: the turn does not read it again.
    person: User | None = None
    speaker: Speaker | None = None  # who said it, in a group
    # Whether the tools may change or remove the owner's memory (a group's member who does not
    # administer it may not).
    may_change_memory: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clean(self.text))
        object.__setattr__(self, "sent_at", ensure_utc(self.sent_at))


def clean(text: str) -> str:
    """What the model reads is what is stored: PostgreSQL refuses NUL characters in text."""
    return text.replace("\x00", "")


async def person_in(session: AsyncSession, message: Incoming) -> User | None:
    """The owner's row in the turn's session: the caller's copy when it read one (no statement)."""
    person = message.person
    # A row created a moment ago has columns still unread (database defaults): read it here.
    if person is not None and person.id == message.owner and not inspect(person).unloaded:
        return await session.merge(person, load=False)
    return await session.get(User, message.owner)


async def store_said(
    session: AsyncSession,
    user: User,
    message: Incoming,
    *,
    conversation_id: int | None = None,
    kind: str | None = None,
    in_day: bool = True,
    day: DaySegment | None = None,
) -> TranscriptMessage:
    """Store the person's message (chat, group and onboarding turns) and move their last message's
    time (`day`: its day segment, when the caller read it already)."""
    if user.last_message_at is None or message.sent_at > user.last_message_at:
        user.last_message_at = message.sent_at
    return await write_message(
        session,
        user,
        role="user",
        content=message.text,
        sent_at=message.sent_at,
        kind=kind or message.kind,
        conversation_id=conversation_id,
        telegram_message_id=message.telegram_message_id,
        in_day=in_day,
        speaker=message.speaker,
        day=day,
    )


async def store_answer(
    session: AsyncSession,
    user: User,
    message: Incoming,
    *,
    said_id: int,
    text: str,
    kind: str,
    conversation_id: int | None = None,
    in_day: bool = True,
    day_segment_id: int | None = None,
) -> tuple[TranscriptMessage, Counted | None]:
    """Store the bot's answer to the person's stored message `said_id`, at the message's time.

    `day_segment_id`: the day the person's message went into, which is the answer's (the same
    time): the answer is counted into it in one statement, nothing read first, and how the day
    stands is returned with the row.
    """
    if day_segment_id is None:
        row = await write_message(
            session,
            user,
            role="assistant",
            content=text,
            sent_at=message.sent_at,
            kind=kind,
            conversation_id=conversation_id,
            reply_to_id=said_id,
            in_day=in_day,
        )
        return row, None
    row = await TranscriptRepository(session).add(
        user_id=user.id,
        conversation_id=conversation_id,
        role="assistant",
        kind=kind,
        content=text,
        sent_at=message.sent_at,
        reply_to_id=said_id,
        day_segment_id=day_segment_id,
    )
    return row, await DaySegmentRepository(session).count_in(day_segment_id, row.id, message.sent_at)


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
    day: DaySegment | None = None,
) -> TranscriptMessage:
    """Store one message in the caller's transaction and count it into its day.

    `in_day=False` keeps the row out of the day segments (onboarding's exchange, which is not part
    of the user's days). `speaker`: who said a group chat's message. `day`: the message's day
    segment when the caller read it already in this session. Raises `IntegrityError` at flush when
    the Telegram id is stored already.
    """
    segment = (
        day
        or await DaySegmentRepository(session).open(
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


# Open days whose unsummarised text this process has counted: about one per person talking.
DAYS_KEPT = 10_000


class DayText:
    """How many tokens of each open day no summary covers yet, as this process counted them, so an
    answer adds its exchange's instead of reading the day's text again."""

    def __init__(self, count: Callable[[str], int], *, days: int = DAYS_KEPT) -> None:
        self.count = count
        # segment id -> (the last message a summary covers, the day's message count, its tokens)
        self._kept: BoundedCache[int, tuple[int | None, int, int]] = BoundedCache(max_entries=days)

    async def tokens(self, session: AsyncSession, day: Counted, added: Sequence[str]) -> int:
        """The day's unsummarised tokens, `added` (its newest messages) included: read once, then
        counted on while only this process's answers move the day."""
        kept = self._kept.get(day.id)
        summarised = day.last_summarized_message_id
        if kept is not None and kept[:2] == (summarised, day.message_count - len(added)):
            total = kept[2] + sum(self.count(text) + 1 for text in added)
        else:
            texts = (
                await session.execute(
                    select(TranscriptMessage.content).where(
                        TranscriptMessage.day_segment_id == day.id,
                        TranscriptMessage.role != "system",
                        TranscriptMessage.id > (summarised or 0),
                    )
                )
            ).scalars()
            total = self.count("\n".join(texts))
        self._kept.put(day.id, (summarised, day.message_count, total))
        return total
