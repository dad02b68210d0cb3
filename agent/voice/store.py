"""Every write the voice surface makes, each behind `_may_write`: the one place a /forget tombstone
is to be checked before a call's transcript or a voice fact reaches the memory.

A finished call is stored by the turn service (`TurnService.store_call`, agent/turn/call_turn.py) as a
turn that calls no model, serialised with the user's other turns; `_may_write` is handed to it and
runs in the turn's own transaction.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.memory.facts import FactAdded
from agent.memory.service import Facts
from agent.turn.call_turn import FinishedCall, StoredCall
from agent.turn.service import TurnService
from db.models import User
from db.repositories.prompts import PromptRepository


class VoiceStore:
    """Writes voice facts, call transcripts and call-start snapshots for one user at a time."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        facts: Facts,
        turns: TurnService,
    ) -> None:
        self.sessions = sessions
        self.facts = facts
        # A call is stored as one of the service's turns, never beside a text turn of this process.
        self.turns = turns

    async def _may_write(self, session: AsyncSession, user_id: int) -> User | None:
        """The user, when their memory may take this write (None: gone, or forgotten)."""
        return await session.get(User, user_id)

    async def add_fact(self, user_id: int, text: str, category: str, at: datetime) -> FactAdded | None:
        """`update_memory`: save one cleaned fact as `memory_add` does (deduplicated, graph too)."""
        async with self.sessions() as session:
            if await self._may_write(session, user_id) is None:
                return None
        return await self.facts.add(
            user_id, text, conversation_id=None, at=at, source="voice", category=category
        )

    async def record_prompt(self, user_id: int, prompt: str, snapshot: dict[str, Any], at: datetime) -> None:
        """Keep a call's starting prompt and snapshot next to the text turns' (`/prompt` shows it)."""
        async with self.sessions() as session, session.begin():
            if await self._may_write(session, user_id) is None:
                return
            await PromptRepository(session).add(
                user_id=user_id,
                conversation_id=None,
                message_id=None,
                instructions=prompt,
                snapshot=snapshot,
                created_at=at,
            )

    async def store_call(self, user_id: int, call: FinishedCall) -> StoredCall | None:
        """Store a finished call once (by call id); None when the user's memory takes no writes."""
        return await self.turns.store_call(user_id, call, may_write=self._may_write)
