"""The delivery parts of one application, built once: the inbox, its dispatcher, the stops and, without
a webhook, the poller.

Handlers stay ordinary python-telegram-bot handlers. The dispatcher feeds each leased row through
`application.process_update` as a `WorkedUpdate` that carries the row (bot/delivery/worked_update.py);
the handlers' context reads it as `context.row`, a handler that answers gives the row the answer
its turn returned (`context.row.answer`), and the dispatcher sends it once the handler returns,
recording it on the row with the first chunk Telegram accepts. Replies a handler sends itself
(commands, rate-limit notes) are sent at least once: a crash before the row is marked done runs the
handler again on resume.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram.ext import Application

from agent.core.clock import Clock
from agent.core.settings import Settings
from bot.delivery.dispatcher import Dispatcher
from bot.delivery.inbox import UpdateInbox
from bot.delivery.polling import Poller
from bot.delivery.stops import Stops
from bot.delivery.worked_row import WorkedRow
from bot.delivery.worked_update import WorkedUpdate

logger = logging.getLogger(__name__)


@dataclass
class DeliveryRunner:
    """What runs while the bot runs: the dispatcher always, the poller without a webhook."""

    inbox: UpdateInbox
    dispatcher: Dispatcher
    poller: Poller | None
    grace_seconds: float
    stops: Stops

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
    application: Application[Any, Any, Any, Any, Any, Any],
    settings: Settings,
    sessions: async_sessionmaker[AsyncSession],
    clock: Clock,
    *,
    single_process: bool,
    webhook: bool,
    allowed_updates: list[str],
) -> DeliveryRunner:
    """The inbox machinery of one application (`single_process`: SQLite, one instance at a time)."""

    async def process(worked: WorkedRow) -> None:
        try:
            update = WorkedUpdate.of(worked, application.bot)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            logger.error(
                "unreadable inbox row", extra={"update_id": worked.row.update_id, "error": repr(exc)}
            )
            worked.outcome = "ignored"
            return
        await application.process_update(update)

    dispatcher = Dispatcher(
        sessions=sessions,
        clock=clock,
        bot=application.bot,
        process=process,
        concurrency=settings.max_concurrent_turns,
        lease_seconds=settings.inbox_lease_seconds,
        poll_seconds=settings.inbox_poll_seconds,
        max_attempts=settings.inbox_max_attempts,
        retry_seconds=settings.db_retry_seconds,
        retention=timedelta(hours=settings.inbox_retention_hours),
        single_process=single_process,
    )
    # Several instances share PostgreSQL: a stop may reach another one than the turn's.
    stops = Stops(sessions, poll_seconds=None if single_process else settings.stream_interval_seconds)
    inbox = UpdateInbox(sessions, clock, dispatcher=dispatcher, stops=stops)
    poller = (
        None
        if webhook
        else Poller(
            application.bot, inbox, timeout=settings.polling_timeout_seconds, allowed_updates=allowed_updates
        )
    )
    return DeliveryRunner(inbox, dispatcher, poller, settings.shutdown_grace_seconds, stops)
