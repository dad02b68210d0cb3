"""What the Telegram handlers share: the runtime plus the bot-only helpers, kept in `bot_data`."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from telegram import Bot
from telegram import User as TelegramUser
from telegram.ext import CallbackContext

from agent.onboarding import OnboardingService
from agent.users import get_or_create_user
from bot.ratelimit import RateLimiter, Scope
from bot.runtime import Runtime
from bot.sending import send_text
from db.models import User

SERVICES_KEY = "nikita"


def telegram_identity(person: TelegramUser) -> str:
    """The surface key of a Telegram user: the user row's key and what rate limits count."""
    return f"telegram:{person.id}"


class ArrivalOrder:
    """One FIFO lock per Telegram user, taken first thing in a handler.

    Updates are processed concurrently; this keeps one user's messages in arrival order from the
    very first await (user lookup, rate limit) to the last reply sent, while other users run freely.
    """

    def __init__(self) -> None:
        self._locks: dict[int, asyncio.Lock] = {}
        self._holders: dict[int, int] = {}

    @asynccontextmanager
    async def hold(self, key: int) -> AsyncIterator[None]:
        """Run the body after every earlier update of this user."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._holders[key] = self._holders.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._holders[key] -= 1
            if not self._holders[key]:
                del self._holders[key]
                self._locks.pop(key, None)


class RecentIds:
    """Update ids seen lately, so a delivery Telegram retries is handled once."""

    def __init__(self, size: int = 10_000) -> None:
        self.size = size
        self._seen: OrderedDict[int, None] = OrderedDict()

    def first_time(self, update_id: int) -> bool:
        """True the first time an id is offered; False for repeats (within the last `size` ids)."""
        if update_id in self._seen:
            return False
        self._seen[update_id] = None
        if len(self._seen) > self.size:
            self._seen.popitem(last=False)
        return True


@dataclass
class BotServices:
    """The runtime and the bot's own helpers."""

    runtime: Runtime
    onboarding: OnboardingService
    limiter: RateLimiter
    # Bounds turns in flight (see MAX_CONCURRENT_TURNS); waiting here holds no database connection.
    turn_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(8))
    order: ArrivalOrder = field(default_factory=ArrivalOrder)
    updates: RecentIds = field(default_factory=RecentIds)

    async def account(self, person: TelegramUser, now: datetime) -> tuple[User, bool]:
        """The stored user behind a Telegram user, created on first contact."""
        settings = self.runtime.settings
        onboard = settings.onboarding_enabled
        return await get_or_create_user(
            self.runtime.sessions,
            key=telegram_identity(person),
            now=now,
            timezone=settings.default_timezone,
            # Without onboarding the Telegram first name is the name to use.
            name=None if onboard else person.first_name,
            telegram_id=person.id,
            onboarding_status="pending" if onboard else "complete",
        )

    async def over_limit(
        self, bot: Bot, person: TelegramUser, chat_id: int, now: datetime, scope: Scope = "message"
    ) -> bool:
        """True, after a friendly answer, when the person is over the scope's limit (then stop)."""
        verdict = await self.limiter.check(telegram_identity(person), now, scope)
        if not verdict.allowed:
            await send_text(bot, chat_id, verdict.message)
        return not verdict.allowed


def services(context: CallbackContext[Any, Any, Any, Any]) -> BotServices:
    """The services stored by `build_application`."""
    found = context.application.bot_data[SERVICES_KEY]
    assert isinstance(found, BotServices)
    return found
