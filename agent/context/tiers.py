"""The context tiers: each loader reads one source in its own DB session and returns a block.

A block is a heading and items, best first; the budget manager cuts items from the end. A loader
returns None when its tier has nothing to say (no summary yet, no open threads, ...). A block is
rendered inside its own tag with the stored text neutralised (agent/context/fence.py).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import Any, Literal
from zoneinfo import ZoneInfo

from sqlalchemy import Integer, Select, bindparam, case, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import is_group
from agent.context.fence import fence, neutralise
from agent.context.threads import ThreadRow, priority_classes, rank_threads, thread_lines
from agent.core.clock import ensure_utc, local_day
from agent.history.imported import IMPORTED_LINE
from db.models import IMPORTED_KINDS, Conversation, ConversationThread, DaySegment, TranscriptMessage, User
from db.repositories.day_segments import DaySegmentRepository

TierName = Literal[
    "briefing", "time", "profile", "today", "yesterday", "threads", "last_conversation", "memory", "thoughts"
]


@dataclass(frozen=True)
class TierBlock:
    """One tier's text: a heading line and items, best first."""

    name: TierName
    heading: str
    items: tuple[str, ...]

    def render(self) -> str:
        """The block as it appears in the instructions: fenced in its tag, stored text made inert."""
        if not self.items:
            return ""
        return fence(self.name, [self.heading, *(neutralise(item) for item in self.items)])

    def with_items(self, items: tuple[str, ...]) -> TierBlock:
        """The same block with other items."""
        return replace(self, items=items)


def part_of_day(hour: int) -> str:
    """Morning, afternoon, evening or night for an hour of the day."""
    if 5 <= hour < 12:
        return "morning"
    if 12 <= hour < 17:
        return "afternoon"
    if 17 <= hour < 22:
        return "evening"
    return "night"


def describe_gap(seconds: float) -> str:
    """A human phrase for how long ago something was."""
    minutes = seconds / 60
    if minutes < 2:
        return "just now"
    if minutes < 90:
        return f"{round(minutes)} minutes ago"
    hours = minutes / 60
    if hours < 36:
        return f"{round(hours)} hours ago"
    days = round(hours / 24)
    return f"{days} days ago"


def time_block(user: User, now: datetime, previous_message_at: datetime | None) -> TierBlock:
    """The time tier: local weekday and part of day, and how long since their (a group's: anyone's)
    last message."""
    local = now.astimezone(ZoneInfo(user.timezone))
    line = f"It's {local:%A} {part_of_day(local.hour)} ({local:%Y-%m-%d %H:%M}, {user.timezone})"
    group = is_group(user)
    if previous_message_at is None:
        line += "; this is the group's first message" if group else "; this is their first message"
    else:
        gap = describe_gap((now - ensure_utc(previous_message_at)).total_seconds())
        line += f"; someone in the group last wrote {gap}" if group else f"; they last wrote {gap}"
    return TierBlock("time", "Now:", (line + ".",))


def profile_block(user: User, facts: Sequence[str] = ()) -> TierBlock | None:
    """The profile: what onboarding told us (name, interests, boundaries and the rest of
    users.profile), then the facts chosen for the profile (agent/memory/profile.py), in their order.

    A group chat's row names the group (its title), never a person to call by that name.
    """
    group = is_group(user)
    named = f"Group: {user.name}" if group else f"Name to use: {user.name}"
    lines = [named] if user.name else []
    for key, value in sorted((user.profile or {}).items()):
        if value in (None, "", [], {}):
            continue
        shown = ", ".join(str(v) for v in value) if isinstance(value, list) else str(value)
        lines.append(f"{key.replace('_', ' ').capitalize()}: {shown}")
    lines += [f"- {fact}" for fact in facts]
    return (
        TierBlock("profile", "About this group:" if group else "About them:", tuple(lines)) if lines else None
    )


def _moment_text(moment: Any) -> str:
    """Key moments are strings or small dicts, depending on who wrote them."""
    if isinstance(moment, dict):
        for key in ("text", "content", "moment", "summary", "description"):
            if isinstance(moment.get(key), str):
                return str(moment[key])
        return ""
    return moment if isinstance(moment, str) else ""


_SECTION = re.compile(r"^#+\s*summary\s*$(.*?)(?=^#+\s|\Z)", re.IGNORECASE | re.MULTILINE | re.DOTALL)


def summary_section(markdown: str) -> str:
    """The "Summary" section of a hybrid Markdown day summary, or the whole text when it has none."""
    match = _SECTION.search(markdown)
    text = match.group(1).strip() if match else ""
    return text or markdown.strip()


async def _segment(session: AsyncSession, user_id: int, day: date) -> DaySegment | None:
    return await DaySegmentRepository(session).for_day(user_id, day)


# How a tier finds a day's segment: read alone, or from the days the collection read together.
SegmentOf = Callable[[AsyncSession, int, date], Awaitable[DaySegment | None]]


@functools.cache
def _days_query() -> Select[DaySegment]:
    return select(DaySegment).where(
        DaySegment.user_id == bindparam("user_id"),
        DaySegment.day >= bindparam("first"),
        DaySegment.day <= bindparam("last"),
    )


class Days:
    """A person's day segments from `first` to `last`, read in one statement by whichever tier asks
    first (today, yesterday and the week of one collection share it); a failed read is tried again."""

    def __init__(self, user_id: int, first: date, last: date) -> None:
        self.user_id, self.first, self.last = user_id, first, last
        self._read: dict[date, DaySegment] | None = None

    async def read(self, session: AsyncSession) -> dict[date, DaySegment]:
        """The segments by day."""
        if self._read is None:
            params = {"user_id": self.user_id, "first": self.first, "last": self.last}
            rows = (await session.execute(_days_query(), params)).scalars().all()
            self._read = {row.day: row for row in rows}
        return self._read

    async def segment_of(self, session: AsyncSession, user_id: int, day: date) -> DaySegment | None:
        """One day's segment (a `SegmentOf`), from the read when the day is in it."""
        if user_id != self.user_id or not self.first <= day <= self.last:
            return await _segment(session, user_id, day)
        return (await self.read(session)).get(day)


async def load_today(
    session: AsyncSession,
    user: User,
    now: datetime,
    *,
    key_moments: int,
    conversation_id: int | None = None,
    raw_budget: int = 0,
    count: Callable[[str], int] = len,
    segment_of: SegmentOf = _segment,
) -> TierBlock | None:
    """Today's day summary, its most recent key moments, and the turns no summary covers yet.

    The turns are those of today's earlier conversations (never `conversation_id`'s, which the
    history carries) written after the summary was (or all of them, before the first summary): the
    newest kept within `raw_budget` tokens less what the summary and moments take, in order. A
    user back from a pause that closed the conversation finds them here until post-processing has
    summarised them.
    """
    segment = await segment_of(session, user.id, local_day(now, user.timezone))
    if segment is None:
        return None
    items: list[str] = []
    if segment.summary and segment.summary.strip():
        items.append(segment.summary.strip())
    moments = [text for m in (segment.key_moments or []) if (text := _moment_text(m).strip())]
    # The most recent moments, newest first, so a budget cut drops the oldest.
    items += [f"- {text}" for text in reversed(moments[-key_moments:])] if key_moments > 0 else []
    left = raw_budget - sum(count(item) for item in items)
    # `now` is the conversation's start: a day that began with it has no other conversation's turns.
    began_here = conversation_id is not None and ensure_utc(segment.first_message_at) >= ensure_utc(now)
    turns = (
        await _unsummarised(session, segment, conversation_id, user.timezone, left, count)
        if left > 0 and not began_here
        else []
    )
    if turns:
        items += ["Not in the summary yet, from today's earlier conversation:", *turns]
    return TierBlock("today", "Earlier today:", tuple(items)) if items else None


# At most this many of today's unsummarised turns are read (newest first) to fill the raw window,
# and each is cut to this many characters.
_RAW_TURNS = 200
_RAW_TURN_CHARS = 600


_Covered = Literal["id", "time"] | None


@functools.cache
def _unsummarised_query(*, elsewhere: bool, covered: _Covered) -> Select[str, str, datetime, str | None]:
    # One statement per shape, built once: building it on every turn cost more than running it.
    stmt = select(
        TranscriptMessage.role,
        TranscriptMessage.content,
        TranscriptMessage.sent_at,
        TranscriptMessage.speaker_name,
    ).where(
        TranscriptMessage.day_segment_id == bindparam("segment_id"),
        TranscriptMessage.role.in_(("user", "assistant")),
        TranscriptMessage.conversation_id.is_not(None),
        # A chat imported from another assistant is never told as a talk with the companion.
        TranscriptMessage.kind != IMPORTED_LINE,
    )
    if elsewhere:
        stmt = stmt.where(TranscriptMessage.conversation_id != bindparam("conversation_id"))
    if covered == "id":
        stmt = stmt.where(TranscriptMessage.id > bindparam("covered"))
    elif covered == "time":
        stmt = stmt.where(TranscriptMessage.sent_at > bindparam("covered"))
    return stmt.order_by(TranscriptMessage.id.desc()).limit(_RAW_TURNS)


async def _unsummarised(
    session: AsyncSession,
    segment: DaySegment,
    conversation_id: int | None,
    timezone: str,
    budget: int,
    count: Callable[[str], int],
) -> list[str]:
    """Lines of the day's turns that no summary covers, outside this conversation, newest kept."""
    params: dict[str, object] = {"segment_id": segment.id}
    if conversation_id is not None:
        params["conversation_id"] = conversation_id
    covered: _Covered = None
    # Covered by the summary: at or before the last message it was written from (the rule the
    # timeline and conversation search use too).
    if segment.summary and segment.summary.strip():
        if segment.last_summarized_message_id is not None:
            covered, params["covered"] = "id", segment.last_summarized_message_id
        elif segment.summary_updated_at is not None:
            covered, params["covered"] = "time", segment.summary_updated_at
    stmt = _unsummarised_query(elsewhere=conversation_id is not None, covered=covered)
    rows = (await session.execute(stmt, params)).all()
    zone = ZoneInfo(timezone)
    lines: list[str] = []
    for row in rows:
        text = " ".join(row.content.split())
        if len(text) > _RAW_TURN_CHARS:
            text = text[: _RAW_TURN_CHARS - 1] + "…"
        if not text:
            continue
        # A group's lines name their speaker; a private chat's are the user's or the bot's.
        who = row.speaker_name or ("User" if row.role == "user" else "You")
        line = f"{ensure_utc(row.sent_at).astimezone(zone):%H:%M} {who}: {text}"
        budget -= count(line)
        if budget < 0:
            break
        lines.append(line)
    return lines[::-1]


async def load_yesterday(
    session: AsyncSession, user: User, now: datetime, *, segment_of: SegmentOf = _segment
) -> TierBlock | None:
    """Yesterday's day summary, its Summary section only: "Yesterday: ..."."""
    day = local_day(now, user.timezone) - timedelta(days=1)
    segment = await segment_of(session, user.id, day)
    if segment is None or not segment.summary or not segment.summary.strip():
        return None
    return TierBlock("yesterday", "Yesterday:", (summary_section(segment.summary),))


@functools.cache
def _threads_query() -> Select[int, str, str, datetime]:
    # Within one priority class the score falls with age, so the best `limit` overall are among the
    # newest `limit` of each class: rank in SQL per class, never load every open thread. Built once
    # (the priority classes are constants): building it cost more than running it.
    known = priority_classes()
    whens = [(ConversationThread.type.in_(types), value) for value, types in sorted(known.items())]
    klass = case(*whens, else_=0)
    rank = func.row_number().over(
        partition_by=klass, order_by=(ConversationThread.created_at.desc(), ConversationThread.id.desc())
    )
    inner = (
        select(
            ConversationThread.id,
            ConversationThread.type,
            ConversationThread.content,
            ConversationThread.created_at,
            rank.label("rank"),
        )
        .where(ConversationThread.user_id == bindparam("user_id"), ConversationThread.status == "open")
        .subquery()
    )
    return select(inner.c.id, inner.c.type, inner.c.content, inner.c.created_at).where(
        inner.c.rank <= bindparam("limit", type_=Integer)
    )


async def load_threads(session: AsyncSession, user: User, now: datetime, *, limit: int) -> TierBlock | None:
    """The best open threads by priority × recency: "Unfinished topics: ..."."""
    rows = [
        ThreadRow(id=r.id, type=r.type, content=r.content, created_at=ensure_utc(r.created_at))
        for r in (await session.execute(_threads_query(), {"user_id": user.id, "limit": limit})).all()
    ]
    ranked = rank_threads(rows, today=local_day(now, user.timezone), timezone=user.timezone, limit=limit)
    if not ranked:
        return None
    return TierBlock("threads", "Unfinished topics:", tuple(thread_lines(ranked)))


@functools.cache
def _last_conversation_query(*, before: bool) -> Select[str | None, datetime | None, datetime]:
    stmt = (
        select(Conversation.summary, Conversation.ended_at, Conversation.last_message_at)
        # A chat imported from another assistant was never a talk with the companion.
        .where(Conversation.user_id == bindparam("user_id"), Conversation.kind.not_in(IMPORTED_KINDS))
        .order_by(Conversation.id.desc())
        .limit(1)
    )
    return stmt.where(Conversation.id < bindparam("conversation_id")) if before else stmt


async def load_last_conversation(
    session: AsyncSession, user: User, conversation_id: int | None, now: datetime, *, min_gap: timedelta
) -> TierBlock | None:
    """The previous conversation's summary if it ended over `min_gap` ago: "Last time we talked: ...".

    Without a current conversation (a voice call starting) the newest one is the previous one.
    """
    params: dict[str, int] = {"user_id": user.id}
    if conversation_id is not None:
        params["conversation_id"] = conversation_id
    stmt = _last_conversation_query(before=conversation_id is not None)
    row = (await session.execute(stmt, params)).one_or_none()
    if row is None or not row.summary or not row.summary.strip():
        return None
    ended = ensure_utc(row.ended_at or row.last_message_at)
    if now - ended <= min_gap:
        return None  # recent enough that today's and yesterday's summaries cover it
    when = describe_gap((now - ended).total_seconds())
    return TierBlock("last_conversation", f"Last time we talked ({when}):", (row.summary.strip(),))


def facts_block(lines: Sequence[str]) -> TierBlock | None:
    """The facts found for this message (from the list, then the graph's) as a block."""
    items = tuple(f"- {line.strip()}" for line in lines if line and line.strip())
    return TierBlock("memory", "What you remember:", items) if items else None
