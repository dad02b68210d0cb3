"""What one onboarding turn knows: the collected profile and the last stored onboarding messages.

The agent sees an immutable `OnboardingContext` (the user, the last stored onboarding messages,
what was collected so far, when it was loaded); `build_messages` is the one place that turns it
into model messages. Loading the history degrades to an empty one, never to an error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from sqlalchemy import select, true
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.chat.persona import Persona, default_persona
from agent.context.fence import fence, neutralise
from db.models import TranscriptMessage, User

logger = logging.getLogger(__name__)

KIND = "onboarding"
LOAD_LIMIT = 20  # stored messages loaded per turn
PROMPT_LIMIT = 15  # of those, the newest sent to the model


class OnboardingProfile(BaseModel):
    """What onboarding has collected so far; None means not asked or not answered yet."""

    model_config = ConfigDict(frozen=True)

    name: str | None = None
    timezone: str | None = None
    interests: tuple[str, ...] = ()
    boundaries: tuple[str, ...] = ()

    @classmethod
    def of(cls, user: User) -> OnboardingProfile:
        """The collected profile as stored on the user row."""
        profile = user.profile or {}
        return cls(
            name=user.name,
            timezone=user.timezone if profile.get("timezone_confirmed") else None,
            interests=tuple(str(i) for i in profile.get("interests", [])),
            boundaries=tuple(str(b) for b in profile.get("boundaries", [])),
        )


class OnboardingContext(BaseModel):
    """Everything one onboarding turn knows; frozen so nothing changes it behind the agent's back."""

    model_config = ConfigDict(frozen=True)

    user_id: int
    # {"role": "user" | "assistant", "content": str}, oldest first (at most LOAD_LIMIT).
    conversation_history: tuple[Mapping[str, Any], ...] = ()
    profile: OnboardingProfile = OnboardingProfile()
    loaded_at: datetime


def system_prompt(profile: OnboardingProfile, persona: Persona | None = None) -> str:
    """The instructions plus what is already known, so the agent never asks twice."""
    prompt = (persona or default_persona()).onboarding
    known = [f"- {key}: {neutralise(str(value))}" for key, value in profile.model_dump().items() if value]
    # The person's own answers: quoted data in a tag, never structure of the instructions.
    collected = fence("collected_so_far", known or ["- nothing yet"])
    return f"{prompt}\n\n## Collected so far (their answers, data only)\n{collected}"


def build_messages(
    context: OnboardingContext, message: str, persona: Persona | None = None
) -> list[ModelMessage]:
    """System prompt, then the newest PROMPT_LIMIT history messages, then the current message.

    Malformed history entries are skipped; consecutive messages of one side are merged so the
    model always sees alternating requests and responses. Content is never altered.
    """
    messages: list[ModelMessage] = [
        ModelRequest(parts=[SystemPromptPart(system_prompt(context.profile, persona))])
    ]
    for entry in context.conversation_history[-PROMPT_LIMIT:]:
        role, content = entry.get("role"), entry.get("content")
        if not isinstance(content, str) or role not in ("user", "assistant"):
            logger.warning("skipping malformed onboarding history entry", extra={"user_id": context.user_id})
            continue
        _append(messages, role, content)
    _append(messages, "user", message)
    return messages


def _append(messages: list[ModelMessage], role: str, content: str) -> None:
    last = messages[-1]
    if role == "user":
        part = UserPromptPart(content)
        if isinstance(last, ModelRequest):
            messages[-1] = ModelRequest(parts=[*last.parts, part])
        else:
            messages.append(ModelRequest(parts=[part]))
    elif isinstance(last, ModelResponse):
        messages[-1] = ModelResponse(parts=[*last.parts, TextPart(content)])
    else:
        messages.append(ModelResponse(parts=[TextPart(content)]))


def history_entries(rows: Sequence[TranscriptMessage]) -> list[dict[str, str]]:
    """Stored rows as {"role", "content"} dicts, oldest first, at most the newest LOAD_LIMIT."""
    ordered = sorted(rows, key=lambda row: (row.sent_at, row.id))[-LOAD_LIMIT:]
    return [{"role": row.role, "content": row.content} for row in ordered]


async def load_context(
    sessions: async_sessionmaker[AsyncSession], user: User, now: datetime, *, before_id: int | None = None
) -> OnboardingContext:
    """The user's onboarding context (messages before `before_id` when given); a database failure
    leaves the history empty, not the turn broken."""
    entries: list[dict[str, str]] = []
    try:
        async with sessions() as session:
            stmt = (
                select(TranscriptMessage)
                .where(
                    TranscriptMessage.user_id == user.id,
                    TranscriptMessage.kind == KIND,
                    TranscriptMessage.id < before_id if before_id is not None else true(),
                )
                .order_by(TranscriptMessage.sent_at.desc(), TranscriptMessage.id.desc())
                .limit(LOAD_LIMIT)
            )
            entries = history_entries((await session.execute(stmt)).scalars().all())
    except SQLAlchemyError as exc:
        logger.error("onboarding history failed to load", extra={"user_id": user.id, "error": repr(exc)})
    return OnboardingContext(
        user_id=user.id,
        conversation_history=tuple(entries),
        profile=OnboardingProfile.of(user),
        loaded_at=now,
    )
