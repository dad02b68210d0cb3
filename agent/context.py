"""The dynamic context of a turn, given to the model as `instructions`.

This is the seam the working-memory tiers plug into: `ContextBuilder.build` returns the text and a
snapshot of what went in. Today it carries the time tier and the user's profile.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Conversation, User


@dataclass(frozen=True)
class BuiltContext:
    """The instructions text and the snapshot describing it."""

    text: str
    snapshot: dict[str, Any] = field(default_factory=dict)


def part_of_day(hour: int) -> str:
    """Morning, afternoon, evening or night for an hour of the day."""
    if 5 <= hour < 12:
        return "morning"
    if 12 <= hour < 17:
        return "afternoon"
    if 17 <= hour < 22:
        return "evening"
    return "night"


def describe_gap(seconds: float) -> str:
    """A human phrase for how long ago something was."""
    minutes = seconds / 60
    if minutes < 2:
        return "just now"
    if minutes < 90:
        return f"{round(minutes)} minutes ago"
    hours = minutes / 60
    if hours < 36:
        return f"{round(hours)} hours ago"
    return f"{round(hours / 24)} days ago"


class ContextBuilder:
    """Builds the per-turn context; the memory tiers extend it."""

    async def build(
        self,
        session: AsyncSession,
        *,
        user: User,
        conversation: Conversation,
        text: str,
        now: datetime,
        previous_message_at: datetime | None,
    ) -> BuiltContext:
        """Assemble the context for this message."""
        local = now.astimezone(ZoneInfo(user.timezone))
        time_line = f"It's {local:%A} {part_of_day(local.hour)} ({local:%Y-%m-%d %H:%M}, {user.timezone})"
        if previous_message_at is not None:
            time_line += f"; they last wrote {describe_gap((now - previous_message_at).total_seconds())}"
        lines = ["## Now", time_line + "."]
        profile_lines = [f"Name to use: {user.name}"] if user.name else []
        for key, value in sorted((user.profile or {}).items()):
            if value:
                profile_lines.append(f"{key.replace('_', ' ').capitalize()}: {value}")
        if profile_lines:
            lines += ["", "## About them", *profile_lines]
        return BuiltContext(
            text="\n".join(lines),
            snapshot={"tiers": {"time": {"present": True}, "profile": {"present": bool(profile_lines)}}},
        )
