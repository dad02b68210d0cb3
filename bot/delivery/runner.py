"""Durable delivery wired to one Application: the inbox, the dispatcher and (polling mode) the poller.

Handlers stay ordinary python-telegram-bot handlers. The dispatcher feeds each leased row through
`application.process_update`; the handlers' context (bot/handlers/context.py) finds the row by its
update id (`row_for`), a handler that answers through a turn passes the row's receipt
(`context.row.receipt`), and the dispatcher sends what the receipt recorded once the handler
returns. Replies a handler sends itself (commands, rate-limit notes) are sent at least
once: a crash before the row is marked done runs the handler again on resume.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from telegram import Update
from telegram.ext import Application

from agent.core.settings import Settings
from bot.delivery.dispatcher import Dispatcher
from bot.delivery.intake import Inbox
from bot.delivery.polling import Poller
from bot.delivery.reply import Delivery
from bot.delivery.stops import Stops
from bot.runtime import Runtime

logger = logging.getLogger(__name__)

AnyApplication = Application[Any, Any, Any, Any, Any, Any]


@dataclass
class DeliveryRunner:
    """What runs while the bot runs: the dispatcher always, the poller without a webhook."""

    inbox: Inbox
    dispatcher: Dispatcher
    poller: Poller | None
    grace_seconds: float
    stops: Stops
    # The rows whose updates the handlers are running now, by update id (one row per update id).
    handling: dict[int, Delivery] = field(default_factory=dict)

    def row_for(self, update_id: int) -> Delivery | None:
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
    settings: Settings = runtime.settings
    handling: dict[int, Delivery] = {}

    async def process(delivery: Delivery) -> None:
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
    inbox = Inbox(runtime.sessions, runtime.clock, dispatcher=dispatcher, stops=stops)
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
