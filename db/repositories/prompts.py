"""Context snapshots (`generated_prompts`): what each turn's model call was given; the caller commits."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import GeneratedPrompt


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
    ) -> GeneratedPrompt:
        """Record what one turn's model call was given."""
        prompt = GeneratedPrompt(
            user_id=user_id,
            conversation_id=conversation_id,
            message_id=message_id,
            instructions=instructions,
            context_snapshot=snapshot,
            created_at=created_at,
        )
        self.session.add(prompt)
        await self.session.flush()
        return prompt

    async def latest_for(self, user_id: int) -> GeneratedPrompt | None:
        """The newest snapshot of a user."""
        stmt = (
            select(GeneratedPrompt)
            .where(GeneratedPrompt.user_id == user_id)
            .order_by(GeneratedPrompt.id.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def traces(self, conversation_id: int, *, limit: int = 20) -> list[str]:
        """The W3C traceparents the conversation's newest turns recorded (while tracing was on)."""
        trace = GeneratedPrompt.context_snapshot["trace"].as_string()
        stmt = (
            select(trace)
            .where(GeneratedPrompt.conversation_id == conversation_id, trace.is_not(None))
            .order_by(GeneratedPrompt.id.desc())
            .limit(limit)
        )
        return [str(value) for value in (await self.session.execute(stmt)).scalars() if value]
