"""What the Telegram handlers share: the runtime plus the bot-only helpers, kept in `bot_data`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from telegram import Bot, Update
from telegram import User as TelegramUser
from telegram.ext import CallbackContext

from agent.access import AccessPolicy
from agent.onboarding import OnboardingService
from agent.users import get_or_create_user
from bot.delivery.reply import Delivery
from bot.delivery.runner import DeliveryRunner
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

    The inbox dispatcher already works one update per user at a time, in order, across processes
    (bot/delivery); inside one process this lock is therefore never contended. It stays as the
    handlers' statement of what they rely on.
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


@dataclass
class BotServices:
    """The runtime and the bot's own helpers."""

    runtime: Runtime
    onboarding: OnboardingService
    limiter: RateLimiter
    # Who may use the bot (ACCESS, ALLOWED_USERS, /allow, /deny); bot/access.py's gate asks it.
    access: AccessPolicy
    # The inbox, its dispatcher and the poller: every update reaches the handlers through it.
    delivery: DeliveryRunner
    # Bounds turns in flight (see MAX_CONCURRENT_TURNS); waiting here holds no database connection.
    turn_slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(8))
    order: ArrivalOrder = field(default_factory=ArrivalOrder)

    def inbox_row(self, update: Update) -> Delivery:
        """The inbox row this update is worked from: pass its `receipt` to a turn, and the
        dispatcher sends the answer the turn recorded."""
        delivery = self.delivery.dispatcher.delivery(update.update_id)
        if delivery is None:
            raise RuntimeError(f"update {update.update_id} is not being worked from the inbox")
        return delivery

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
        """True when the person is over the scope's limit (then stop); the first refusal in a window
        gets a friendly answer, the others none."""
        verdict = await self.limiter.check(telegram_identity(person), now, scope)
        if not verdict.allowed and verdict.tell:
            await send_text(bot, chat_id, verdict.message)
        return not verdict.allowed


def services(context: CallbackContext[Any, Any, Any, Any]) -> BotServices:
    """The services stored by `build_application`."""
    found = context.application.bot_data[SERVICES_KEY]
    assert isinstance(found, BotServices)
    return found
