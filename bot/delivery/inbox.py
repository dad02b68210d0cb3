"""Receiving updates: check Telegram's ranges, find the sender, then commit the update's JSON to the inbox.

Webhook bodies are stored as Telegram sent them; polled updates as python-telegram-bot's
`to_dict()` (which `Update.de_json` reads back unchanged, unknown fields included). An update whose
numbers or types are out of Telegram's ranges (`bot/delivery/ranges.py`), or that PTB cannot read,
is stored dead, without its JSON, with the reason: it is acknowledged like any other, never worked.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Update

from agent.core.clock import Clock
from bot.delivery.ranges import INT64, out_of_range
from bot.delivery.stops import Stops
from bot.errors import NotAnUpdateError
from db.inbox import InboxRepository, LeasedUpdate, NewUpdate
from db.uninterrupted import uninterrupted

logger = logging.getLogger(__name__)


# The update Telegram sends when a user presses the stop button of a draft sent with `can_stop`.
STOP_UPDATE = "stopped_message_generation"


def parse_update(payload: Any) -> NewUpdate:
    """The inbox row of one raw update: its id, sender and chat, or a dead row when it is out of
    Telegram's ranges or malformed; raises NotAnUpdateError for JSON that is not an update at all
    (not an object, or without an integer update_id)."""
    if not isinstance(payload, dict):
        raise NotAnUpdateError(f"an update is a JSON object, got {type(payload).__name__}")
    update_id = payload.get("update_id")
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        raise NotAnUpdateError("an update needs an integer update_id")
    if (reason := out_of_range(payload)) is not None:
        return dead_update(payload, reason)
    try:
        update = Update.de_json(payload, None)
    except (ValueError, TypeError, LookupError, AttributeError, ArithmeticError) as exc:
        return dead_update(payload, f"malformed: {exc!r}"[:500])
    return from_update(update, payload)


def from_update(update: Update, payload: dict[str, Any] | None = None) -> NewUpdate:
    """The inbox row of a parsed update (its JSON: `payload`, or the update's own `to_dict()`)."""
    raw = payload if payload is not None else update.to_dict()
    if payload is None and (reason := out_of_range(raw)) is not None:
        return dead_update(raw, reason)
    if (stop := raw.get(STOP_UPDATE)) is not None:
        return _stop_update(update.update_id, stop, raw)
    sender, chat = update.effective_user, update.effective_chat
    return NewUpdate(update.update_id, sender.id if sender else None, chat.id if chat else None, raw)


def _stop_update(update_id: int, stop: Any, raw: dict[str, Any]) -> NewUpdate:
    # Newer than python-telegram-bot: the update's fields are read from its JSON.
    chat = stop.get("chat") if isinstance(stop, dict) else None
    chat_id = chat.get("id") if isinstance(chat, dict) else None
    draft_id = stop.get("draft_id") if isinstance(stop, dict) else None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (chat_id, draft_id)):
        return dead_update(raw, "malformed: a stopped_message_generation without chat id and draft_id")
    return NewUpdate(update_id, None, chat_id, raw, draft_stop=draft_id)


def dead_update(payload: dict[str, Any], reason: str) -> NewUpdate:
    """A dead row for an update that can never be worked: its id when it fits, none of its JSON."""
    update_id = payload.get("update_id")
    storable = isinstance(update_id, int) and -INT64 <= update_id < INT64
    logger.warning("update cannot be worked, stored dead", extra={"reason": reason})
    return NewUpdate(update_id if storable else None, None, None, {}, dead=reason)


class Claimer(Protocol):
    """What the intake needs of the dispatcher (bot/delivery/dispatcher.py) to hand rows over."""

    holder: str
    lease: timedelta

    def reserve(self, wanted: int) -> int:
        """Promise up to `wanted` worker slots."""
        ...

    def adopt(
        self,
        rows: list[LeasedUpdate],
        reserved: int,
        stored: asyncio.Future[bool] | None = None,
        claimed: tuple[int, int] | None = None,
    ) -> None:
        """Work the rows leased for the promised slots (`stored`: True once their commit succeeded;
        `claimed`: when the lease started and ended, time.time_ns(), for the rows' traces)."""
        ...


class UpdateInbox:
    """Commits received updates and hands them to this process's dispatcher.

    When the dispatcher has free slots, the same transaction that stores the updates also leases
    them (the dispatcher's usual rule, so order and fairness are unchanged; a lone update is stored
    and leased in one statement). The leased rows start before the commit: the commit's disk flush
    then runs while the turn starts instead of before it. Nothing about a row is written before its
    commit succeeded (the row's `stored` future, awaited by every write of `bot/delivery/worked_row.py`),
    and the caller still acknowledges the update only after the commit.
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        dispatcher: Claimer | None = None,
        stops: Stops | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.dispatcher = dispatcher
        self.stops = stops  # told of each stop once it is stored, to end a turn running here

    async def receive(self, updates: Sequence[NewUpdate]) -> int:
        """Store updates in one transaction (repeats ignored); returns how many were new.

        Raises what the database raises: the caller must then not acknowledge the updates.
        """
        # A stop (the polling loop cancelled, uvicorn cutting a request) waits for this commit: a
        # cancelled SQLite write would hold the database's lock (db/uninterrupted.py).
        added = await uninterrupted(self._store(updates))
        if self.stops is not None:
            for update in updates:
                if update.draft_stop is not None and update.chat_id is not None:
                    self.stops.heard(update.chat_id, update.draft_stop)
        return added

    async def _store(self, updates: Sequence[NewUpdate]) -> int:
        d = self.dispatcher
        senders = [u for u in updates if u.telegram_user_id is not None and u.dead is None]
        reserved = d.reserve(len(senders)) if d is not None else 0
        stored: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        handed_over = False
        try:
            started = time.time_ns()
            async with self.sessions() as session, session.begin():
                repo = InboxRepository(session)
                now = self.clock.now()
                leased: list[LeasedUpdate] = []
                if d is not None and reserved and len(updates) == 1:
                    new, row = await repo.add_leased(updates[0], holder=d.holder, now=now, lease=d.lease)
                    added, leased = int(new), [row] if row is not None else []
                else:
                    added = await repo.add(updates, now=now)
                    if d is not None and added and reserved:
                        leased = await repo.claim(holder=d.holder, now=now, lease=d.lease, limit=reserved)
                if d is not None:
                    d.adopt(leased, reserved, stored, (started, time.time_ns()))
                    handed_over = True
            stored.set_result(True)
        finally:
            if not stored.done():
                stored.set_result(False)  # not committed (or not known to be): the rows' work stops
            if d is not None and not handed_over:
                d.adopt([], reserved)
        return added
