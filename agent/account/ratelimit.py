"""Rate limits per Telegram identity, counted in the database.

Each limited action (a message, an onboarding model call, /start, /export, /memory, the timeline's
"Regenerate summary") has a sliding
one-minute and a rolling 24-hour limit. Every allowed request is one `rate_limit_events` row keyed
by a keyed hash (HMAC-SHA256) of the identity ("telegram:<id>"), never by the user row: the counts
survive /forget (a new user row would otherwise start from zero), restarts and several instances.
The raw Telegram id is not stored, because the person may have asked to be forgotten; rows older
than a day are deleted. Refused requests are not counted against the limit; each one is counted
in the day's bot-wide counters (`daily_counts`, "rate_<scope>_<window>"), which the dashboard charts.

The friendly "over the limit" answer is sent once per window, not once per refused request: a
person who forwards 300 messages gets one note, not 280. The first refusal in a window leaves a
marker row (scope `<scope>!m` or `<scope>!d`, never counted as a request), and later refusals in
the same window find it and stay quiet.

A group chat's messages to the bot count together, under the group's key (`group_key`:
"telegram-chat:<chat id>") and its own scope and caps (GROUP_RATE_LIMIT_*), so one busy group
never spends a member's private allowance, nor the other way round.

A request is inserted first and counted with the others in the same transaction (removed again
when it is one too many): on SQLite the insert takes the database's write lock, so the next check
waits for this one; on PostgreSQL a transaction-level advisory lock on the identity does the same.
Two instances therefore never both let the last allowed request through.

A request that is one Telegram message (`once_for`: its id) is counted once however often its
inbox row runs (a row resumed after a crash runs its handler again): its row's time is the
message's date, whole seconds from Telegram, plus the id modulo a million as microseconds (`keyed`),
so the statement that counts also sees whether this very message was counted before. Then it is
let through uncounted (`again`), and a refusal already told for it is told again (its first note may
not have gone out), without counting it a second time.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from sqlalchemy import case, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core import observability
from agent.core.settings import Settings
from db.models import RateLimitEvent
from db.repositories.access import AccessRepository

logger = logging.getLogger(__name__)

MINUTE = timedelta(minutes=1)
DAY = timedelta(days=1)
PRUNE_EVERY = timedelta(minutes=10)
# Advisory lock keys: the top bits say what is locked (turns 1 << 56, writers 2 << 56).
RATE_LOCK_SPACE = 3 << 56
STRANGER_REPLY = "Hi! This bot is private. If you know its owner, ask them to add you."
_DEVELOPMENT_KEY = b"nikita rate limits (development key: set RATE_LIMIT_HASH_KEY)"

# "stranger" is never counted: only its one-note-per-window marker is used (`first_refusal`).
Scope = Literal["message", "group", "onboarding", "start", "export", "memory", "regenerate", "stranger"]
Window = Literal["minute", "day"]

# The day's bot-wide counter (daily_counts.name) and the metric's `limit` of a rate-limit refusal.
RATE_COUNTER_PREFIX = "rate_"


def refusal_counter(scope: Scope, window: Window) -> str:
    """The name a refusal by this limit is counted under, e.g. "rate_message_minute"."""
    return f"{RATE_COUNTER_PREFIX}{scope}_{window}"


_MESSAGES: dict[tuple[Scope, Window], str] = {
    ("message", "minute"): (
        "Whoa, that's a lot of messages at once! Give me a minute to catch up, then write again."
    ),
    ("message", "day"): "We've talked a lot today, and I need a break. Let's pick this up tomorrow!",
    ("group", "minute"): "That's a lot at once! Give me a minute to catch up, then ask me again.",
    ("group", "day"): "I've talked a lot in this group today. Let's pick this up tomorrow!",
    ("onboarding", "minute"): (
        "Slow down a little, I'm still getting to know you! Give me a minute, then tell me more."
    ),
    ("onboarding", "day"): (
        "We've started over quite a few times today. Let's get to know each other again tomorrow!"
    ),
    ("start", "minute"): "You've pressed /start a lot just now. Give me a minute, or just write to me!",
    ("start", "day"): "That's a lot of /start for one day. Just write to me, or try again tomorrow.",
    ("export", "minute"): "I've just sent you an export. Give me a minute before the next one.",
    ("export", "day"): "You've asked for your data a few times today already. You can ask again tomorrow.",
    ("memory", "minute"): "Give me a minute before I go through my memory again.",
    ("memory", "day"): "I've shown you what I remember a lot today. Ask me again tomorrow!",
    ("regenerate", "minute"): "You asked for new summaries a lot; try again in a minute.",
    ("regenerate", "day"): "You asked for new summaries a lot today; try again tomorrow.",
    ("stranger", "minute"): STRANGER_REPLY,
    ("stranger", "day"): STRANGER_REPLY,
}


@dataclass(frozen=True)
class Limit:
    """At most `per_minute` in any minute and `per_day` in any 24 hours; 0 means no limit."""

    per_minute: int
    per_day: int


@dataclass(frozen=True)
class Verdict:
    """Whether a request may go on, and which limit stopped it."""

    allowed: bool
    scope: Scope | None = None
    window: Window | None = None
    # Whether to answer the refusal (the first one in its window) or drop it quietly.
    tell: bool = True
    # This very message was decided before (its row runs again): counted then, not again now.
    again: bool = False

    @property
    def limit(self) -> Window | None:
        """Which window refused it (None when allowed)."""
        return self.window

    @property
    def message(self) -> str:
        """A friendly explanation for the user."""
        if self.scope is None or self.window is None:
            return ""
        return _MESSAGES[(self.scope, self.window)]


def keyed(at: datetime, once_for: int | None) -> datetime:
    """When a request is counted: a message's (`once_for`: its id) at its date plus the id modulo a
    million as microseconds, so its count is found again; any other request at `at`."""
    return at if once_for is None else at.replace(microsecond=once_for % 1_000_000)


def limits_from(settings: Settings) -> dict[Scope, Limit]:
    """Every limit the settings configure."""
    s = settings
    return {
        "message": Limit(s.rate_limit_per_minute, s.rate_limit_per_day),
        "group": Limit(s.group_rate_limit_per_minute, s.group_rate_limit_per_day),
        "onboarding": Limit(s.rate_limit_onboarding_per_minute, s.rate_limit_onboarding_per_day),
        "start": Limit(s.rate_limit_start_per_minute, s.rate_limit_start_per_day),
        "export": Limit(s.rate_limit_export_per_minute, s.rate_limit_export_per_day),
        "memory": Limit(s.rate_limit_memory_per_minute, s.rate_limit_memory_per_day),
        "regenerate": Limit(s.timeline_regenerate_per_minute, s.timeline_regenerate_per_day),
    }


def hash_key(settings: Settings) -> bytes:
    """The HMAC key: RATE_LIMIT_HASH_KEY, else derived from the bot token (a secret the DB never sees)."""
    if settings.rate_limit_hash_key is not None and settings.rate_limit_hash_key.get_secret_value():
        return settings.rate_limit_hash_key.get_secret_value().encode()
    if settings.telegram_bot_token is not None and settings.telegram_bot_token.get_secret_value():
        token = settings.telegram_bot_token.get_secret_value().encode()
        return hmac.new(b"nikita rate-limit key", token, hashlib.sha256).digest()
    return _DEVELOPMENT_KEY


class RateLimiter:
    """Per-identity limits for each scope, counted from `rate_limit_events`."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        limits: Mapping[Scope, Limit],
        key: bytes = _DEVELOPMENT_KEY,
    ) -> None:
        self.sessions = sessions
        self.limits = dict(limits)
        self._key = key
        self._pruned_at: datetime | None = None

    @classmethod
    def from_settings(cls, sessions: async_sessionmaker[AsyncSession], settings: Settings) -> RateLimiter:
        """The limiter the settings describe."""
        return cls(sessions, limits=limits_from(settings), key=hash_key(settings))

    def subject(self, identity: str) -> str:
        """The stored stand-in for an identity: a keyed hash, 64 hex characters."""
        return hmac.new(self._key, identity.encode(), hashlib.sha256).hexdigest()

    async def check(
        self, identity: str, now: datetime, scope: Scope = "message", *, once_for: int | None = None
    ) -> Verdict:
        """Count this request if it is allowed; refuse it (without counting) when over a limit.
        `once_for`: the Telegram message it is, counted once however often it is checked."""
        if not self.limits_scope(scope):
            return Verdict(True)
        async with self.sessions() as session, session.begin():
            verdict = await self.check_in(session, identity, now, scope, once_for=once_for)
        await self.settle(verdict, scope, now)
        return verdict

    def limits_scope(self, scope: Scope) -> bool:
        """Whether requests of this scope are limited at all."""
        limit = self.limits.get(scope)
        return limit is not None and (limit.per_minute > 0 or limit.per_day > 0)

    async def check_in(
        self,
        session: AsyncSession,
        identity: str,
        now: datetime,
        scope: Scope,
        *,
        once_for: int | None = None,
    ) -> Verdict:
        """`check` in the caller's transaction (which must commit for the request to count); the
        caller then calls `settle`."""
        limit = self.limits.get(scope)
        if limit is None or (limit.per_minute <= 0 and limit.per_day <= 0):
            return Verdict(True)
        subject = self.subject(identity)
        await _lock(session, subject)
        at = keyed(now, once_for)
        event = RateLimitEvent(subject=subject, scope=scope, at=at)
        session.add(event)
        await session.flush()  # SQLite: the write lock is ours until commit
        recent = case((RateLimitEvent.at > at - MINUTE, 1), else_=0)
        this = case((RateLimitEvent.at == at, 1), else_=0)
        row = (
            await session.execute(
                select(
                    func.coalesce(func.sum(recent), 0), func.count(), func.coalesce(func.sum(this), 0)
                ).where(
                    RateLimitEvent.subject == subject,
                    RateLimitEvent.scope == scope,
                    RateLimitEvent.at > at - DAY,
                )
            )
        ).one()
        # Both counts include this request.
        in_minute, in_day, counted = int(row[0]), int(row[1]), int(row[2])
        if once_for is not None and counted > 1:
            # This message was let through before (its row runs again): not counted twice.
            await session.delete(event)
            return Verdict(True, again=True)
        verdict = Verdict(True)
        if 0 < limit.per_minute < in_minute:
            verdict = Verdict(False, scope, "minute")
        elif 0 < limit.per_day < in_day:
            verdict = Verdict(False, scope, "day")
        if not verdict.allowed:
            await session.delete(event)
            verdict = await self._told_once(session, subject, verdict, at, once_for)
            if not verdict.again:
                # Every refusal, told or not, counts in the day's bot-wide counters (the dashboard).
                counter = refusal_counter(scope, verdict.window or "day")
                await AccessRepository(session).bump(now.astimezone(UTC).date(), counter)
        return verdict

    async def settle(self, verdict: Verdict, scope: Scope, now: datetime) -> None:
        """After the check's commit: a refusal logged and counted, old counts pruned now and then."""
        if not verdict.allowed:
            logger.info("rate limited", extra={"scope": scope, "window": verdict.window})
            observability.refused(refusal_counter(scope, verdict.window or "day"))
        await self.prune(now)

    async def refusal_in(
        self,
        session: AsyncSession,
        identity: str,
        now: datetime,
        scope: Scope,
        *,
        once_for: int | None = None,
    ) -> Verdict:
        """A refusal decided elsewhere (access), in the caller's transaction: answered only if it is
        the first in a day, or if it is that first one's message again (`once_for`: its id)."""
        subject = self.subject(identity)
        await _lock(session, subject)
        return await self._told_once(
            session, subject, Verdict(False, scope, "day"), keyed(now, once_for), once_for
        )

    async def _told_once(
        self, session: AsyncSession, subject: str, verdict: Verdict, at: datetime, once_for: int | None
    ) -> Verdict:
        """The refusal, to be answered only if it is the first in its window (a marker row at `at`
        says so) or the message that was (`once_for`) again."""
        assert verdict.scope is not None and verdict.window is not None
        marker = f"{verdict.scope}!{verdict.window[0]}"  # "message!m": at most 16 characters
        this = case((RateLimitEvent.at == at, 1), else_=0)
        told, this_one = (
            await session.execute(
                select(func.count(), func.coalesce(func.sum(this), 0)).where(
                    RateLimitEvent.subject == subject,
                    RateLimitEvent.scope == marker,
                    RateLimitEvent.at > at - (MINUTE if verdict.window == "minute" else DAY),
                )
            )
        ).one()
        if once_for is not None and this_one:
            return Verdict(False, verdict.scope, verdict.window, again=True)
        if told:
            return Verdict(False, verdict.scope, verdict.window, tell=False)
        session.add(RateLimitEvent(subject=subject, scope=marker, at=at))
        return verdict

    async def prune(self, now: datetime) -> None:
        """Delete counts older than a day (they decide nothing), whoever they belong to, now and then."""
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        async with self.sessions() as session, session.begin():
            await session.execute(delete(RateLimitEvent).where(RateLimitEvent.at <= now - DAY))


async def _lock(session: AsyncSession, subject: str) -> None:
    # PostgreSQL: one transaction per identity at a time (SQLite has one writer anyway).
    if session.get_bind().dialect.name == "postgresql":
        key = RATE_LOCK_SPACE | int(subject[:13], 16)  # 52 bits of the hash
        await session.execute(select(func.pg_advisory_xact_lock(key)))
