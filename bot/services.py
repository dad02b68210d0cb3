"""What the Telegram handlers share: the runtime plus the bot-only helpers, kept in the typed `bot_data`.

The durable delivery (bot/delivery) is one of them: the inbox, the dispatcher and (polling mode) the
poller, wired to the application by `build_delivery`. Handlers stay ordinary python-telegram-bot
handlers. The dispatcher feeds each leased row through `application.process_update`; the handlers'
context (bot/handlers/context.py) finds the row by its update id (`row_for`), a handler that answers
through a turn passes the row's receipt (`context.row.receipt`), and the dispatcher sends what the
receipt recorded once the handler returns. Replies a handler sends itself (commands, rate-limit
notes) are sent at least once: a crash before the row is marked done runs the handler again on resume.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from telegram import Bot, Update
from telegram import User as TelegramUser
from telegram.ext import Application

from agent.account.access import AccessPolicy
from agent.account.ratelimit import RateLimiter, Scope
from agent.account.users import get_or_create_user
from bot.delivery.dispatcher import Dispatcher
from bot.delivery.inbox import UpdateInbox
from bot.delivery.polling import Poller
from bot.delivery.sending import send_text
from bot.delivery.stops import Stops
from bot.delivery.worked_row import WorkedRow
from bot.runtime import Runtime
from db.models import User

logger = logging.getLogger(__name__)

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


@dataclass
class DeliveryRunner:
    """What runs while the bot runs: the dispatcher always, the poller without a webhook."""

    inbox: UpdateInbox
    dispatcher: Dispatcher
    poller: Poller | None
    grace_seconds: float
    stops: Stops
    # The rows whose updates the handlers are running now, by update id (one row per update id).
    handling: dict[int, WorkedRow] = field(default_factory=dict)

    def row_for(self, update_id: int) -> WorkedRow | None:
        """The inbox row the handlers of this update work, if they run for one."""
        return self.handling.get(update_id)

    def start(self) -> None:
        """Start working the inbox (and polling)."""
        self.dispatcher.start()
        if self.poller is not None:
            self.poller.start()

    async def stop(self, grace_seconds: float | None = None) -> None:
        """Stop taking updates, then let the rows in flight finish within the grace period."""
        if self.poller is not None:
            await self.poller.stop()
        await self.dispatcher.stop(self.grace_seconds if grace_seconds is None else grace_seconds)


def build_delivery(
    application: AnyApplication, runtime: Runtime, *, webhook: bool, allowed_updates: list[str]
) -> DeliveryRunner:
    """The inbox machinery of one application (built once, in `build_application`)."""
    settings = runtime.settings
    handling: dict[int, WorkedRow] = {}

    async def process(delivery: WorkedRow) -> None:
        payload = delivery.row.payload or {}
        try:
            update = Update.de_json(payload, application.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.error(
                "unreadable inbox row", extra={"update_id": delivery.row.update_id, "error": repr(exc)}
            )
            delivery.outcome = "ignored"
            return
        handling[update.update_id] = delivery
        try:
            await application.process_update(update)
        finally:
            handling.pop(update.update_id, None)

    dispatcher = Dispatcher(
        sessions=runtime.sessions,
        clock=runtime.clock,
        bot=application.bot,
        process=process,
        concurrency=settings.max_concurrent_turns,
        lease_seconds=settings.inbox_lease_seconds,
        poll_seconds=settings.inbox_poll_seconds,
        max_attempts=settings.inbox_max_attempts,
        retry_seconds=settings.db_retry_seconds,
        retention=timedelta(hours=settings.inbox_retention_hours),
        single_process=runtime.engine.dialect.name == "sqlite",
    )
    single_process = runtime.engine.dialect.name == "sqlite"
    # Several instances share PostgreSQL: a stop may reach another one than the turn's.
    poll = None if single_process else settings.stream_interval_seconds
    stops = Stops(runtime.sessions, poll_seconds=poll)
    inbox = UpdateInbox(runtime.sessions, runtime.clock, dispatcher=dispatcher, stops=stops)
    poller = (
        None
        if webhook
        else Poller(
            application.bot,
            inbox,
            timeout=settings.polling_timeout_seconds,
            allowed_updates=allowed_updates,
        )
    )
    return DeliveryRunner(inbox, dispatcher, poller, settings.shutdown_grace_seconds, stops, handling)


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
