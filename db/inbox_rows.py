"""The inbox's rows as the code passes them: an update as received, and a row a worker holds."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class NewUpdate:
    """An update as received: its id, sender and chat (None when it has none) and the raw JSON.

    Its queue is its conversation (`queue_key`): the chat, or the sender for an update without one.

    `dead`: why it can never be worked; it is stored done with that reason and without its JSON
    (`update_id` None when even the id cannot be stored). `draft_stop`: the draft whose stop button
    was pressed in `chat_id`; it is stored done, and the stop in `draft_stops` with it.
    """

    update_id: int | None
    telegram_user_id: int | None
    chat_id: int | None
    payload: dict[str, Any]
    dead: str | None = None
    draft_stop: int | None = None

    @property
    def queue_key(self) -> int | None:
        """The conversation whose rows are worked in order: the chat, else the sender."""
        return self.chat_id if self.chat_id is not None else self.telegram_user_id


@dataclass(frozen=True)
class LeasedUpdate:
    """A row this worker holds: what to process, or the reply still to send."""

    id: int
    update_id: int
    telegram_user_id: int | None
    chat_id: int | None
    payload: dict[str, Any] | None
    status: str
    reply_text: str | None
    reply_chunks_sent: int
    attempts: int
