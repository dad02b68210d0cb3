"""The seam between the touchpoints job and Telegram: the job sends through a `TouchpointMessenger`
that the bot wires in (bot/delivery/touchpoints.py), so jobs never import the bot."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from agent.account.groups import is_group
from db.models import User


def chat_of(user: User) -> int | None:
    """Where the owner's touchpoints go: a person's private chat, or a group's own chat (its
    reminders); never a member's private chat for a group's reminder, nor a group for a person's."""
    return user.chat_id if is_group(user) else user.telegram_id


# Called after each chunk Telegram accepted: (chunks sent so far, total chunks). It raises to stop
# the send when this worker may no longer send (its lease was taken over).
ChunkSent = Callable[[int, int], Awaitable[None]]


class TouchpointMessenger(Protocol):
    """Sends a touchpoint to a chat, chunk by chunk, from chunk `start`."""

    async def send(
        self, chat_id: int, text: str, *, start: int, on_sent: ChunkSent, reminder_id: int | None = None
    ) -> int:
        """Send the chunks of `text` from `start`; the total. The last chunk carries the stop button,
        or for a reminder's occurrence (`reminder_id`) its done and snooze buttons.

        Raises RecipientBlockedError or SendFailedError.
        """
        ...
