"""What the Telegram handlers share: the runtime plus the bot-only helpers, kept in the typed `bot_data`.

The delivery machinery (bot/delivery/runner.py) is one of them: the inbox, its dispatcher, the stops
and, polling, the poller.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from telegram import Bot
from telegram import User as TelegramUser
from telegram.ext import Application

from agent.account.access import AccessPolicy
from agent.account.ratelimit import RateLimiter, Scope
from agent.account.users import admitted
from bot.delivery.runner import DeliveryRunner
from bot.delivery.sending import send_text
from bot.handlers.admins import GroupAdmins
from bot.runtime import Runtime
from db.models import User

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


def telegram_identity(person: TelegramUser) -> str:
    """The surface key of a Telegram user: the user row's key and what rate limits count."""
    return f"telegram:{person.id}"


@dataclass
class BotServices:
    """The runtime and the bot's own helpers."""

    runtime: Runtime
    limiter: RateLimiter
    # Who may use the bot (ACCESS, ALLOWED_USERS, /allow, /deny); bot/handlers/access.py's gate asks it.
    access: AccessPolicy
    # The inbox, its dispatcher and the poller: every update reaches the handlers through it.
    delivery: DeliveryRunner
    # Telegram's answers to "is this member a group admin?", kept briefly: only admins change a
    # group's memory through the model.
    admins: GroupAdmins

    async def admit(
        self,
        bot: Bot,
        person: TelegramUser,
        chat_id: int,
        now: datetime,
        scope: Scope | None = "message",
        *,
        once_for: int | None = None,
    ) -> User | None:
        """The person's account (created on first contact) when the request is within the scope's
        limit, else None (the first refusal in a window gets a friendly answer): one transaction.
        `once_for`: the Telegram message the request is, counted once however often its row runs."""
        settings = self.runtime.settings
        onboard = settings.onboarding_enabled
        verdict, user, _ = await admitted(
            self.runtime.sessions,
            self.limiter,
            scope,
            identity=telegram_identity(person),
            key=telegram_identity(person),
            now=now,
            timezone=settings.default_timezone,
            name=None if onboard else person.first_name,
            telegram_id=person.id,
            onboarding_status="pending" if onboard else "complete",
            once_for=once_for,
        )
        if not verdict.allowed and verdict.tell:
            await send_text(bot, chat_id, verdict.message)
        return user

    async def over_limit(
        self,
        bot: Bot,
        person: TelegramUser,
        chat_id: int,
        now: datetime,
        scope: Scope = "message",
        *,
        once_for: int | None = None,
    ) -> bool:
        """True when the person is over the scope's limit (then stop); the first refusal in a window
        gets a friendly answer, the others none. `once_for` as in `admit`."""
        verdict = await self.limiter.check(telegram_identity(person), now, scope, once_for=once_for)
        if not verdict.allowed and verdict.tell:
            await send_text(bot, chat_id, verdict.message)
        return not verdict.allowed


class BotData:
    """The application's `bot_data` (ContextTypes): the services and how updates arrive, set once by
    `bot.app.build_application` before any handler runs."""

    services: BotServices
    webhook: bool = False
    # Set when the Bot API server refused an ephemeral answer (bot/handlers/group_answers.py): from then
    # on this process answers group commands in the group only.
    ephemeral_refused: bool = False


def services_of(application: AnyApplication) -> BotServices:
    """The services of an application built by `bot.app.build_application`."""
    data: BotData = application.bot_data
    return data.services
