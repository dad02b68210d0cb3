"""Each session's stored PydanticAI history, kept decoded between turns.

Decoding a long session's JSON on every turn (validation of every message) and encoding it again
costs tens of milliseconds at a few hundred turns. Turns of one user are serialised, so the copy
this process wrote last is still the stored one unless the session's message count moved (another
process answered in between, or the row changed): then it is read again from the database.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.history import dump_history, load_history
from db.models import Conversation


@dataclass(frozen=True)
class StoredHistory:
    """The decoded history and its JSON form, as of a message count of the session."""

    version: int
    messages: list[ModelMessage]
    raw: list[Any]

    def extended(self, new_messages: Sequence[ModelMessage], version: int) -> StoredHistory:
        """The history with one turn's new messages appended, without re-encoding the old ones."""
        return StoredHistory(
            version, [*self.messages, *new_messages], [*self.raw, *dump_history(new_messages)]
        )


class SessionHistories:
    """A small LRU of stored histories by conversation id."""

    def __init__(self, *, max_sessions: int = 256) -> None:
        self._entries: OrderedDict[int, StoredHistory] = OrderedDict()
        self._max = max_sessions

    async def load(
        self, sessions: async_sessionmaker[AsyncSession], conversation_id: int, version: int
    ) -> StoredHistory:
        """The history as stored when the session's message count was `version`."""
        cached = self._entries.get(conversation_id)
        if cached is not None and cached.version == version:
            self._entries.move_to_end(conversation_id)
            return cached
        async with sessions() as session:
            raw = await session.scalar(
                select(Conversation.messages).where(Conversation.id == conversation_id)
            )
        messages = load_history(raw)
        return StoredHistory(version, messages, dump_history(messages))

    def remember(self, conversation_id: int, history: StoredHistory) -> None:
        """Keep what was just committed for the next turn."""
        self._entries[conversation_id] = history
        self._entries.move_to_end(conversation_id)
        while len(self._entries) > self._max:
            self._entries.popitem(last=False)

    def forget(self, conversation_id: int) -> None:
        """Drop a session (closed or deleted)."""
        self._entries.pop(conversation_id, None)
