"""Conversation detection: close conversations idle past the conversation timeout (the rule:
agent/turn/conversations.py)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from agent.turn import conversations
from jobs.context import JobContext


async def close_idle_conversations(ctx: JobContext) -> dict[str, Any]:
    """Close and queue every idle conversation; returns how many were closed."""
    idle_for = timedelta(minutes=ctx.settings.conversation_timeout_minutes)
    async with ctx.sessions() as session, session.begin():
        closed = await conversations.close_idle_conversations(
            session,
            ctx.clock.now(),
            idle_for,
            reply_window=timedelta(hours=ctx.settings.touchpoint_reply_window_hours),
        )
    return {"closed": len(closed)}
