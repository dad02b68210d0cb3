"""Receiving updates: find the sender, then commit the update's JSON to the inbox.

Webhook bodies are stored as Telegram sent them; polled updates as python-telegram-bot's
`to_dict()` (which `Update.de_json` reads back unchanged, unknown fields included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Update

from agent.clock import Clock
from agent.errors import NikitaError
from db.inbox import InboxRepository, NewUpdate

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


class Inbox:
    """Commits received updates; `on_new` tells the dispatcher (in this process) there is work."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        *,
        on_new: Callable[[], None] | None = None,
    ) -> None:
        self.sessions = sessions
        self.clock = clock
        self.on_new = on_new

    async def receive(self, updates: Sequence[NewUpdate]) -> int:
        """Store updates in one transaction (repeats ignored); returns how many were new.

        Raises what the database raises: the caller must then not acknowledge the updates.
        """
        async with self.sessions() as session, session.begin():
            added = await InboxRepository(session).add(updates, now=self.clock.now())
        if added and self.on_new is not None:
            self.on_new()
        return added
