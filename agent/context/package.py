"""The context package: everything known about a user at one moment, collected concurrently.

`PackageCollector.collect` runs one collector per part (today, yesterday, threads, last
conversation, the facts for the message, the thoughts, the week's day summaries), each under its own
timeout counted from the collection's start: those that read the database one after another in one
task, on one DB session (agent/context/reads.py: they would only take turns on it as tasks of their
own), and the facts tier beside them in a task and a session of its own. A collector that fails or
times out leaves its own part empty and says why (`Collected.status`/`error`); the others and the
turn go on. Text turns render the package as tiers (agent/context/builder.py); the voice agent's
`get_context` reads the same package (agent/voice/context.py).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import Integer, Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context.facts import MessageFacts, limits_for_budget
from agent.context.profile import ProfileTier, load_profile_tier
from agent.context.reads import Collected, Reader, SharedReads, collect, read_in_turn
from agent.context.tiers import (
    Days,
    TierBlock,
    facts_block,
    load_last_conversation,
    load_threads,
    load_today,
    load_yesterday,
    part_of_day,
    profile_block,
    summary_section,
)
from agent.core.clock import ensure_utc, local_day
from agent.core.settings import Settings
from agent.core.tokens import TokenCounter
from agent.memory.profile import ProfileCache
from db.models import Thought, User
from db.repositories.touchpoints import TouchpointRepository

logger = logging.getLogger(__name__)

# The persona's thoughts shown at once: the newest unused ones.
THOUGHTS_MAX = 3
FOLLOW_UPS_MAX = 5
# The week: the day summaries of the seven local days before today.
WEEK_DAYS = 7


@dataclass(frozen=True)
class TimeAwareness:
    """The user's local time and how long since they last wrote."""

    local: datetime
    day_of_week: str
    part_of_day: str
    hours_since_last_message: float | None


@dataclass(frozen=True)
class ActiveThought:
    """Something the persona thought after a conversation and has not used yet: to share, ask or feel."""

    content: str
    created_at: datetime


@dataclass(frozen=True)
class DaySummary:
    """One past day's summary (its Summary section)."""

    day: date
    summary: str


@dataclass(frozen=True)
class FollowUp:
    """A planned follow-up: when, and what about."""

    due_at: datetime
    content: str


@dataclass(frozen=True)
class ContextPackage:
    """What the context is made of; every collected part says how its collection went."""

    user_id: int
    time: TimeAwareness
    # Onboarding's answers and the facts chosen for the profile (onboarding's alone when the facts
    # could not be read: `profile_facts` says why).
    profile: TierBlock | None
    profile_facts: Collected[ProfileTier]
    today: Collected[TierBlock]
    yesterday: Collected[TierBlock]
    threads: Collected[TierBlock]
    last_conversation: Collected[TierBlock]
    facts: Collected[TierBlock]
    thoughts: Collected[tuple[ActiveThought, ...]]
    week: Collected[tuple[DaySummary, ...]]
    follow_ups: Collected[tuple[FollowUp, ...]]

    def parts(self) -> dict[str, Collected[object]]:
        """The collected parts by name, in display order (for snapshots and failure notes)."""
        return {
            "today": self.today,
            "yesterday": self.yesterday,
            "threads": self.threads,
            "last_conversation": self.last_conversation,
            "memory": self.facts,
            "thoughts": self.thoughts,
            "week": self.week,
            "follow_ups": self.follow_ups,
        }

    def blocks(self) -> dict[str, TierBlock]:
        """The parts that render as tiers, those with something to say."""
        blocks = {
            name: part.value for name, part in self.parts().items() if isinstance(part.value, TierBlock)
        }
        if (thoughts := thoughts_block(self.thoughts.value or ())) is not None:
            blocks["thoughts"] = thoughts
        return blocks


def time_awareness(user: User, now: datetime, previous_message_at: datetime | None) -> TimeAwareness:
    """Local time, weekday, part of day and hours since the previous message."""
    local = now.astimezone(ZoneInfo(user.timezone))
    hours = None
    if previous_message_at is not None:
        hours = round((now - ensure_utc(previous_message_at)).total_seconds() / 3600, 2)
    return TimeAwareness(local, f"{local:%A}", part_of_day(local.hour), hours)


def thoughts_block(thoughts: tuple[ActiveThought, ...]) -> TierBlock | None:
    """The persona's active thoughts as a tier."""
    items = tuple(f"- {t.content.strip()}" for t in thoughts if t.content.strip())
    if not items:
        return None
    return TierBlock("thoughts", "On your mind (yours to share or ask about, only if it fits):", items)


# Statements built once: building one each turn cost more than running its cached compiled form.
@functools.cache
def _thoughts_query() -> Select[str, datetime]:
    return (
        select(Thought.content, Thought.created_at)
        .where(Thought.user_id == bindparam("user_id"), Thought.used_at.is_(None))
        .order_by(Thought.created_at.desc(), Thought.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )


async def load_thoughts(session: AsyncSession, user: User, *, limit: int) -> tuple[ActiveThought, ...]:
    """The newest thoughts not used yet, newest first."""
    rows = (await session.execute(_thoughts_query(), {"user_id": user.id, "limit": limit})).all()
    return tuple(ActiveThought(r.content, ensure_utc(r.created_at)) for r in rows if r.content.strip())


async def load_follow_ups(session: AsyncSession, user: User, *, limit: int) -> tuple[FollowUp, ...]:
    """The user's planned follow-ups, soonest first."""
    rows = await TouchpointRepository(session).planned_for(user.id, limit=limit)
    return tuple(FollowUp(ensure_utc(r.due_at), r.reason) for r in rows if r.reason.strip())


async def load_week(session: AsyncSession, user: User, now: datetime, days: Days) -> tuple[DaySummary, ...]:
    """The summaries of the seven days before today (the user's calendar), newest first."""
    today = local_day(now, user.timezone)
    rows = sorted((d for d in (await days.read(session)).values() if d.day < today), key=lambda d: d.day)
    return tuple(
        DaySummary(r.day, summary_section(r.summary))
        for r in reversed(rows)
        if r.summary and r.summary.strip()
    )


class PackageCollector:
    """Fills a `ContextPackage`: every collector at once, the database's readers on one DB session."""

    def __init__(
        self,
        settings: Settings,
        *,
        facts: MessageFacts | None,
        counter: TokenCounter,
        today_budget: int,
        profile_budget: int,
    ) -> None:
        self.settings = settings
        self.facts = facts
        self.counter = counter
        self.today_budget = today_budget
        self.profile_budget = profile_budget
        # The profile chosen for each owner's conversation, kept while their facts stay the same.
        self.profiles = ProfileCache(max_owners=settings.history_cache_conversations)

    async def collect(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        user: User,
        conversation_id: int | None,
        text: str,
        now: datetime,
        previous_message_at: datetime | None,
        remaining: int,
        anchor: datetime | None = None,
        reads: SharedReads | None = None,
    ) -> ContextPackage:
        """Every part for this user at `now`; never raises for a part's failure.

        `remaining` is the hard cap less what history will take: it picks the facts tier's limits. The
        conversation's parts (the profile, today, yesterday, threads, last conversation, the week) are
        read as of `anchor`, the conversation's start, so their wording does not change from turn to
        turn; the time and the facts found for this message are read at `now`, leaving out those
        the profile holds.
        """
        s = self.settings
        at = anchor or now
        today_date = local_day(at, user.timezone)
        # Today, yesterday and the week: one read of the week's days.
        days = Days(user.id, today_date - timedelta(days=WEEK_DAYS), today_date)
        # The caller's shared session when it reads beside the collectors, else one of their own.
        shared = reads if reads is not None else SharedReads(sessions)
        started = time.perf_counter()
        readers: list[Reader] = []

        def start[T](
            name: str, limit: float, load: Callable[[AsyncSession], Awaitable[T | None]]
        ) -> asyncio.Future[Collected[T]]:
            done: asyncio.Future[Collected[T]] = asyncio.get_running_loop().create_future()
            readers.append(Reader(name, limit, load, done))  # type: ignore[arg-type]
            return done

        profile = start(
            "profile",
            s.context_facts_timeout_seconds,
            lambda db: load_profile_tier(
                db, user, anchor=at, budget=self.profile_budget, counter=self.counter, profiles=self.profiles
            ),
        )
        today = start(
            "today",
            s.context_today_timeout_seconds,
            lambda db: load_today(
                db,
                user,
                at,
                key_moments=s.context_today_key_moments,
                conversation_id=conversation_id,
                raw_budget=self.today_budget,
                count=self.counter.count,
                segment_of=days.segment_of,
            ),
        )
        yesterday = start(
            "yesterday",
            s.context_yesterday_timeout_seconds,
            lambda db: load_yesterday(db, user, at, segment_of=days.segment_of),
        )
        threads = start(
            "threads",
            s.context_threads_timeout_seconds,
            lambda db: load_threads(db, user, at, limit=s.context_threads_max),
        )
        last_conversation = start(
            "last_conversation",
            s.context_last_conversation_timeout_seconds,
            lambda db: load_last_conversation(
                db,
                user,
                conversation_id,
                at,
                min_gap=timedelta(hours=s.context_last_conversation_after_hours),
            ),
        )
        facts = asyncio.create_task(
            collect(
                "memory",
                s.context_facts_timeout_seconds,
                lambda: self._facts(user.id, text, now, remaining, profile),
                since=started,
            ),
            name="context tier memory",
        )
        thoughts = start(
            "thoughts",
            s.context_thoughts_timeout_seconds,
            lambda db: load_thoughts(db, user, limit=THOUGHTS_MAX),
        )
        week = start("week", s.context_week_timeout_seconds, lambda db: load_week(db, user, at, days))
        follow_ups = start(
            "follow_ups",
            s.context_follow_ups_timeout_seconds,
            lambda db: load_follow_ups(db, user, limit=FOLLOW_UPS_MAX),
        )
        try:
            reading = asyncio.create_task(read_in_turn(shared, readers, started), name="context tiers")
            await asyncio.gather(reading, facts)
        finally:
            if reads is None:
                await shared.close()
        facts_part = facts.result()
        chosen = profile.result()
        if self.facts is None:
            facts_part = Collected(None, "not configured", facts_part.ms)
        return ContextPackage(
            user_id=user.id,
            time=time_awareness(user, now, previous_message_at),
            profile=chosen.value.block if chosen.value is not None else profile_block(user),
            profile_facts=chosen,
            today=today.result(),
            yesterday=yesterday.result(),
            threads=threads.result(),
            last_conversation=last_conversation.result(),
            facts=facts_part,
            thoughts=thoughts.result(),
            week=week.result(),
            follow_ups=follow_ups.result(),
        )

    async def _facts(
        self,
        user_id: int,
        text: str,
        now: datetime,
        remaining: int,
        profile: asyncio.Future[Collected[ProfileTier]],
    ) -> TierBlock | None:
        if self.facts is None:
            return None
        # The facts the profile holds are not repeated (shielded: a timeout here must not cancel
        # the profile's own collection).
        chosen = (await asyncio.shield(profile)).value
        exclude = chosen.profile.ids if chosen is not None else frozenset()
        lines = await self.facts.for_message(
            user_id, text, limits=limits_for_budget(remaining), now=now, exclude=exclude
        )
        return facts_block(lines)
