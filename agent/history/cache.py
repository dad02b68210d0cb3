"""Each conversation's stored PydanticAI history, kept decoded between turns.

Decoding a long conversation's JSON on every turn (validation of every message) and encoding it again
costs tens of milliseconds at a few hundred turns. Turns of one user are serialised, so the copy
this process wrote last is still the stored one unless the conversation's message count moved (another
process answered in between, or the row changed): then it is read again from the database.

The cache is bounded by conversations and by bytes (the histories' JSON size, a stand-in for the memory
their decoded messages take), so a few enormous conversations cannot take the process's memory.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic_ai.messages import ModelMessage
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.bounded import BoundedCache
from agent.history.messages import dump_history, load_history
from db.models import Conversation


@dataclass(frozen=True)
class StoredHistory:
    """The decoded history and its JSON form, as of a message count of the conversation."""

    version: int
    messages: list[ModelMessage]
    raw: list[Any]
    # The JSON size of `raw`, kept up to date turn by turn (what the cache's byte bound counts).
    size: int = 0
    # The stored array is not `raw` (it was broken, or read in an older form): the next write
    # replaces it whole instead of appending to it.
    stale: bool = False

    def extended(self, new_messages: Sequence[ModelMessage], version: int) -> StoredHistory:
        """The history with one turn's new messages appended, without re-encoding the old ones."""
        added = dump_history(new_messages)
        return StoredHistory(
            version, [*self.messages, *new_messages], [*self.raw, *added], self.size + json_size(added)
        )


def json_size(raw: list[Any]) -> int:
    """Bytes of the compact JSON form."""
    return len(json.dumps(raw, separators=(",", ":"), default=str))


class ConversationHistories:
    """An LRU of stored histories by conversation id, bounded by conversations and bytes."""

    def __init__(self, *, max_conversations: int = 256, max_bytes: int = 16_000_000) -> None:
        self._entries: BoundedCache[int, tuple[int, StoredHistory]] = BoundedCache(
            max_entries=max_conversations, max_bytes=max_bytes, size_of=lambda entry: entry[1].size
        )

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def bytes(self) -> int:
        """The JSON size of every history held."""
        return self._entries.bytes

    async def load(
        self, sessions: async_sessionmaker[AsyncSession], conversation_id: int, version: int
    ) -> StoredHistory:
        """The history as stored when the conversation's message count was `version`."""
        cached = self._entries.get(conversation_id)
        if cached is not None and cached[1].version == version:
            return cached[1]
        async with sessions() as session:
            raw = await session.scalar(
                select(Conversation.messages).where(Conversation.id == conversation_id)
            )
        messages = load_history(raw)
        dumped = dump_history(messages)
        return StoredHistory(version, messages, dumped, json_size(dumped), stale=dumped != raw)

    def remember(self, conversation_id: int, history: StoredHistory, *, user_id: int) -> None:
        """Keep what was just committed for the next turn."""
        self._entries.put(conversation_id, (user_id, history))

    def forget(self, conversation_id: int) -> None:
        """Drop a conversation (closed or deleted)."""
        self._entries.pop(conversation_id)

    def holds_user(self, user_id: int) -> bool:
        """Whether a conversation of the user is cached."""
        return any(owner == user_id for _, (owner, _) in self._entries.items())

    def drop_user(self, user_id: int) -> None:
        """Drop every conversation of a user (/forget)."""
        self._entries.drop_where(lambda _, entry: entry[0] == user_id)
