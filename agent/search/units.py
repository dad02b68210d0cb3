"""Units that stand for messages in conversation_search, contributed from above this package.

A unit is something short that names the messages it comes from: a fact about the person
(agent/memory/units.py) is one. It is embedded as a row of `search_chunks` of its own kind whose one
section holds those messages, so the vector side reads it like any section and its cosine reaches
them; its lexical side is scored by the unit's owner and reaches them too. The search index asks
the units to embed what changed in each pass, and forgets them with the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from agent.search.embeddings import Embedder


class MessageUnits(Protocol):
    """What conversation_search needs of units that point at messages; scoped to one user per call."""

    async def index(self, session: AsyncSession, user_id: int, *, embedder: Embedder, now: datetime) -> int:
        """Embed the user's new or changed units and drop the rows of units gone (in the caller's
        transaction); how many were embedded."""
        ...

    async def message_scores(
        self, session: AsyncSession, user_id: int, text: str, *, language: str | None, limit: int
    ) -> dict[int, float]:
        """Each source message's best lexical unit score for the query, relative to the best (0-1]."""
        ...

    async def linked_scores(
        self,
        session: AsyncSession,
        user_id: int,
        seeds: Mapping[int, float],
        *,
        language: str | None,
        limit: int,
    ) -> dict[int, tuple[float, int]]:
        """The messages of the user's units linked to the units standing on the `seeds` (message id ->
        score): each with a score up to its seed's and the seed message it was reached from."""
        ...

    def forget(self, user_id: int) -> None:
        """Drop what this process holds of the user's units (they changed or were deleted)."""
        ...

    def holds(self, user_id: int) -> bool:
        """Whether anything of the user's units is held in this process's memory."""
        ...

    def __len__(self) -> int:
        """How many users' units are held in memory."""
        ...
