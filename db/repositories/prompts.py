"""Context snapshots (`generated_prompts`): what each turn's model call was given; the caller commits."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Insert, Table, bindparam, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GeneratedPrompt, Reminder


@functools.cache
def _add() -> Insert:
    table = cast(Table, GeneratedPrompt.__table__)
    names = ("user_id", "conversation_id", "message_id", "instructions", "context_snapshot", "created_at")
    return insert(table).values({name: bindparam(name) for name in names})


class PromptRepository:
    """Context snapshots (`generated_prompts`)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        *,
        user_id: int,
        conversation_id: int | None,
        message_id: int | None,
        instructions: str,
        snapshot: dict[str, Any],
        created_at: datetime,
    ) -> None:
        """Record what one turn's model call was given (after the conversation's pending changes, in
        order)."""
        await self.session.flush()
        # A Core statement built once: nothing reads the row back, so the ORM's unit of work was all cost.
        await self.session.execute(
            _add(),
            {
                "user_id": user_id,
                "conversation_id": conversation_id,
                "message_id": message_id,
                "instructions": instructions,
                "context_snapshot": snapshot,
                "created_at": created_at,
            },
        )

    async def latest_for(self, user_id: int) -> GeneratedPrompt | None:
        """The newest snapshot of a user."""
        stmt = (
            select(GeneratedPrompt)
            .where(GeneratedPrompt.user_id == user_id)
            .order_by(GeneratedPrompt.id.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def traces(
        self,
        *,
        user_id: int | None = None,
        conversation_id: int | None = None,
        message_ids: Sequence[int] | None = None,
        reminder_id: int | None = None,
        limit: int = 20,
    ) -> list[str]:
        """The W3C traceparents the newest matching turns recorded (while tracing was on): of a user,
        of a conversation, of the turns that stored `message_ids`, of the turn that set a reminder."""
        trace = GeneratedPrompt.context_snapshot["trace"].as_string()
        stmt = select(trace).where(trace.is_not(None))
        if user_id is not None:
            stmt = stmt.where(GeneratedPrompt.user_id == user_id)
        if conversation_id is not None:
            stmt = stmt.where(GeneratedPrompt.conversation_id == conversation_id)
        if message_ids is not None:
            stmt = stmt.where(GeneratedPrompt.message_id.in_(list(message_ids)[-limit:]))
        if reminder_id is not None:
            source = select(Reminder.source_message_id).where(Reminder.id == reminder_id).scalar_subquery()
            stmt = stmt.where(GeneratedPrompt.message_id == source)
        stmt = stmt.order_by(GeneratedPrompt.id.desc()).limit(limit)
        return [str(value) for value in (await self.session.execute(stmt)).scalars() if value]
