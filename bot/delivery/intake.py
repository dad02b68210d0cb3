"""Receiving updates: find the sender, then commit the update's JSON to the inbox.

Webhook bodies are stored as Telegram sent them; polled updates as python-telegram-bot's
`to_dict()` (which `Update.de_json` reads back unchanged, unknown fields included).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Update

from agent.clock import Clock
from agent.errors import NikitaError
from db.inbox import InboxRepository, LeasedUpdate, NewUpdate

logger = logging.getLogger(__name__)


class NotAnUpdateError(NikitaError):
    """JSON that is not a Telegram update object (a webhook body answered 400)."""


def parse_update(payload: Any) -> NewUpdate:
    """The inbox row of one raw update: its id, sender and chat; raises NotAnUpdateError otherwise."""
    if not isinstance(payload, dict):
        raise NotAnUpdateError(f"an update is a JSON object, got {type(payload).__name__}")
    update_id = payload.get("update_id")
    if not isinstance(update_id, int) or isinstance(update_id, bool):
        raise NotAnUpdateError("an update needs an integer update_id")
    try:
        update = Update.de_json(payload, None)
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise NotAnUpdateError(f"update {update_id} is malformed: {exc!r}") from exc
    return from_update(update, payload)


def from_update(update: Update, payload: dict[str, Any] | None = None) -> NewUpdate:
    """The inbox row of a parsed update (its JSON: `payload`, or the update's own `to_dict()`)."""
    sender, chat = update.effective_user, update.effective_chat
    return NewUpdate(
        update.update_id,
        sender.id if sender else None,
        chat.id if chat else None,
        payload if payload is not None else update.to_dict(),
    )


class Claimer(Protocol):
    """What the intake needs of the dispatcher (bot/delivery/dispatcher.py) to hand rows over."""

    owner: str
    lease: timedelta

    def reserve(self, wanted: int) -> int:
        """Promise up to `wanted` worker slots."""
        ...

    def adopt(self, rows: list[LeasedUpdate], reserved: int) -> None:
        """Work the rows leased for the promised slots."""
        ...


class Inbox:
    """Commits received updates and hands them to this process's dispatcher.

    When the dispatcher has free slots, the same transaction that stores the updates also leases
    them (the dispatcher's usual claim, so order and fairness are unchanged): the update starts
    at once, with no second commit and no wait for the dispatcher's next look at the table.
    """

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        dispatcher: Claimer | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.dispatcher = dispatcher

    async def receive(self, updates: Sequence[NewUpdate]) -> int:
        """Store updates in one transaction (repeats ignored); returns how many were new.

        Raises what the database raises: the caller must then not acknowledge the updates.
        """
        wanted = sum(1 for u in updates if u.telegram_user_id is not None)
        reserved = self.dispatcher.reserve(wanted) if self.dispatcher is not None else 0
        leased: list[LeasedUpdate] = []
        try:
            async with self.sessions() as session, session.begin():
                repo = InboxRepository(session)
                now = self.clock.now()
                added = await repo.add(updates, now=now)
                if added and reserved and self.dispatcher is not None:
                    d = self.dispatcher
                    leased = await repo.claim(owner=d.owner, now=now, lease=d.lease, limit=reserved)
        finally:
            if self.dispatcher is not None:
                self.dispatcher.adopt(leased, reserved)
        return added
