"""The timeline of one user: their days, one day's summary card and folded transcript.

Telegram-free: the Mini App in `bot/web/timeline` shows what this module returns.

"Covered" (folded once a summary has covered them): a user or assistant
message is covered when its day has a summary and the message is at or before the last message
that summary was written from (`DaySegment.last_summarized_message_id`). `conversation_search`
marks its hits' `covered_by_summary` with the same function, so a folded message and a search hit agree.
Each run of covered messages is folded in front of the "day summary updated" note that followed
it. Conversation compactions (`history_compactions`) are shown as their own system entries with their
summary, but fold nothing: they shape what the model reads in one conversation, they are not the
user's record of the day, and they count model messages, not transcript rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import local_day
from agent.history.imported import IMPORTED_LINE, Source, imported_sources, source_name
from agent.history.reactions import reactions_on
from db.models import DaySegment, HistoryCompaction, TranscriptMessage
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.timeline import TimelineRepository
from db.repositories.users import UserRepository

# The days a user can have messages on: message times are Unix times (Telegram's `date`, a call's
# start), whose first day west of UTC is 31 December 1969; the last is the calendar's last day
# whose bounds (`day_bounds`) exist in every time zone.
FIRST_DAY = date(1969, 12, 31)
LAST_DAY = date(9999, 12, 30)


@dataclass(frozen=True)
class TimelineUser:
    """The signed-in person as the timeline needs them."""

    id: int
    name: str | None
    timezone: str


@dataclass(frozen=True)
class DayMark:
    """A day with messages, for the day selector."""

    day: date
    messages: int
    summarised: bool
    final: bool


@dataclass(frozen=True)
class Section:
    """One section of the hybrid Markdown summary: its narrative text and its bullet items."""

    title: str
    text: str = ""
    items: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SummaryCard:
    """The day's summary card."""

    day_segment_id: int
    status: str
    summary_markdown: str | None
    sections: list[Section]
    updated_at: datetime | None
    regenerate_pending: bool
    message_count: int


@dataclass(frozen=True)
class Entry:
    """One line of the timeline: a message, a system note, or a conversation compaction."""

    id: int
    type: Literal["message", "note", "compaction"]
    role: str
    kind: str
    content: str
    at: datetime
    covered: bool = False
    reactions: tuple[str, ...] = ()  # the emoji the person put on this answer
    # A line of a chat imported from another assistant: who said it, "you, to ChatGPT" or "ChatGPT".
    speaker: str | None = None


@dataclass(frozen=True)
class Block:
    """Either one entry, or a fold of covered messages (shown closed until the user opens it)."""

    type: Literal["entry", "folded"]
    entries: list[Entry]


@dataclass(frozen=True)
class DayView:
    """Everything the page shows for one day."""

    day: date
    timezone: str
    card: SummaryCard | None
    blocks: list[Block]
    truncated: bool


def parse_summary(markdown: str | None) -> list[Section]:
    """The hybrid summary's sections ("## Title" headings); bullets become items, "none" is dropped."""
    groups: list[tuple[str, list[str]]] = []
    for raw in (markdown or "").splitlines():
        line = raw.strip()
        if line.startswith("## "):
            groups.append((line[3:].strip(), []))
        elif line:
            if not groups:
                groups.append(("Summary", []))
            groups[-1][1].append(line)
    sections: list[Section] = []
    for title, lines in groups:
        bullets = [line[2:].strip() for line in lines if line.startswith(("- ", "* "))]
        text = " ".join(line for line in lines if not line.startswith(("- ", "* ")))
        sections.append(Section(title, text, [b for b in bullets if b and b.lower() != "none"]))
    return sections


def covered_by_summary(message: TranscriptMessage, segment: DaySegment | None) -> bool:
    """Whether the day's summary was written from this message (see the module docstring)."""
    if message.role == "system" or segment is None or not segment.summary:
        return False
    if segment.last_summarized_message_id is not None:
        return message.id <= segment.last_summarized_message_id
    return segment.summary_updated_at is not None and message.sent_at <= segment.summary_updated_at


def fold(entries: Sequence[Entry]) -> list[Block]:
    """Runs of covered messages become folds; everything else stays a single entry, in order."""
    blocks: list[Block] = []
    run: list[Entry] = []
    for entry in entries:
        if entry.type == "message" and entry.covered:
            run.append(entry)
            continue
        if run:
            blocks.append(Block("folded", run))
            run = []
        blocks.append(Block("entry", [entry]))
    if run:
        blocks.append(Block("folded", run))
    return blocks


def within_calendar(day: date) -> bool:
    """Whether a user can have messages on `day` (FIRST_DAY to LAST_DAY); no other day has bounds."""
    return FIRST_DAY <= day <= LAST_DAY


def day_bounds(day: date, timezone: str) -> tuple[datetime, datetime]:
    """The UTC instants where a calendar day starts and ends in a time zone (a day `within_calendar`)."""
    zone = ZoneInfo(timezone)
    start = datetime.combine(day, time(0), tzinfo=zone)
    end = datetime.combine(day + timedelta(days=1), time(0), tzinfo=zone)
    return start.astimezone(UTC), end.astimezone(UTC)


def _message_entry(message: TranscriptMessage, segment: DaySegment | None) -> Entry:
    is_note = message.role == "system" and message.kind == "note"
    return Entry(
        id=message.id,
        type="note" if is_note else "message",
        role=message.role,
        kind=message.kind,
        content=message.content,
        at=message.sent_at,
        covered=covered_by_summary(message, segment),
    )


def _told(source: Source) -> str:
    """Who said an imported line, as the page names them: "You, to ChatGPT" or "ChatGPT"."""
    name = source_name(source.kind)
    return f"You, to {name}" if source.role == "user" else name


def _compaction_entry(row: HistoryCompaction) -> Entry:
    return Entry(
        id=row.id, type="compaction", role="system", kind="compaction", content=row.summary, at=row.created_at
    )


def _card(segment: DaySegment) -> SummaryCard:
    return SummaryCard(
        day_segment_id=segment.id,
        status=segment.status,
        summary_markdown=segment.summary,
        sections=parse_summary(segment.summary),
        updated_at=segment.summary_updated_at,
        regenerate_pending=segment.regenerate_requested_at is not None,
        message_count=segment.message_count,
    )


RegenerateOutcome = Literal["queued", "already_queued", "no_messages"]


class Timeline:
    """Reads a user's timeline and queues summary rewrites; the user id is always the caller's."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, max_entries: int = 2000) -> None:
        self.sessions = sessions
        self.max_entries = max_entries

    async def user_for_telegram(self, telegram_id: int) -> TimelineUser | None:
        """The stored user behind a Telegram id (None before their first message or after /forget)."""
        async with self.sessions() as session:
            user = await UserRepository(session).by_telegram_id(telegram_id)
        return None if user is None else TimelineUser(user.id, user.name, user.timezone)

    async def calendar(self, user: TimelineUser) -> list[DayMark]:
        """Every day with messages, newest first."""
        async with self.sessions() as session:
            repo = TimelineRepository(session)
            segments = await repo.segments(user.id)
            loose = await repo.unsegmented_times(user.id)
        marks = {
            s.day: DayMark(s.day, s.message_count, bool(s.summary), s.status == "final") for s in segments
        }
        for at in loose:
            day = local_day(at, user.timezone)
            mark = marks.get(day, DayMark(day, 0, False, False))
            marks[day] = DayMark(day, mark.messages + 1, mark.summarised, mark.final)
        return sorted(marks.values(), key=lambda m: m.day, reverse=True)

    async def day(self, user: TimelineUser, day: date) -> DayView:
        """The day's summary card and its timeline, folded."""
        async with self.sessions() as session:
            segment = await DaySegmentRepository(session).for_day(user.id, day)
            zone = segment.timezone if segment is not None else user.timezone
            start, end = day_bounds(day, zone)
            repo = TimelineRepository(session)
            messages = await repo.messages(
                user.id, segment.id if segment else None, start, end, limit=self.max_entries + 1
            )
            compactions = await repo.compactions(user.id, start, end)
            shown = messages[: self.max_entries]
            answers = [m.id for m in shown if m.role == "assistant"]
            reactions = await reactions_on(session, user.id, answers)
            imported = [m.id for m in shown if m.kind == IMPORTED_LINE]
            sources = await imported_sources(session, user.id, imported) if imported else {}
        truncated = len(messages) > self.max_entries
        entries = [
            replace(
                _message_entry(m, segment),
                reactions=tuple(reactions.get(m.id, ())),
                speaker=_told(sources[m.id]) if m.id in sources else None,
            )
            for m in shown
        ]
        entries += [_compaction_entry(c) for c in compactions]
        # Stable sort: a compaction made at a message's time comes after that message.
        entries.sort(key=lambda e: e.at)
        card = _card(segment) if segment is not None else None
        return DayView(day=day, timezone=zone, card=card, blocks=fold(entries), truncated=truncated)

    async def request_regeneration(self, user: TimelineUser, day: date, now: datetime) -> RegenerateOutcome:
        """Queue the day-summaries job to rewrite this day's summary."""
        async with self.sessions() as session, session.begin():
            segment = await DaySegmentRepository(session).for_day(user.id, day)
            if segment is None or segment.message_count == 0:
                return "no_messages"
            queued = await DaySummaryRepository(session).request_regeneration(segment.id, now)
        return "queued" if queued else "already_queued"
