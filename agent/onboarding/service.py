"""Onboarding: a short conversation, run by its own agent, that learns a new user's name, place,
interests and boundaries before the main agent takes over.

The agent sees an immutable `OnboardingContext` (the user, the last stored onboarding messages,
what was collected so far, when it was loaded); `build_messages` is the one place that turns it
into model messages. Loading the history degrades to an empty one, never to an error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic_ai import Agent, ModelRetry, RunContext
from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from sqlalchemy import func, select, true
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.timezones import Ambiguous, lookup_timezone
from agent.chat.persona import Persona, default_persona, with_name
from agent.context.fence import fence, neutralise
from agent.core.errors import UserNotFoundError
from agent.core.usage import UsageMeter, metering, record_run, store_usage
from agent.reminders.store import move_to_zone
from agent.turn.daily_tokens import BUDGET_REPLY, TokenBudget, counting
from agent.turn.serial import TurnQueue
from agent.turn.transcript import TurnReceipt, delivered, write_message
from db.models import TranscriptMessage, User
from db.transient import is_transient

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

    def missing(self) -> list[str]:
        """What onboarding still needs before it can finish."""
        return [name for name in ("name", "timezone") if getattr(self, name) is None]


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


@dataclass
class OnboardingDeps:
    """The run's working copy of the profile; the tools fill it, the service stores it."""

    name: str | None
    timezone: str | None
    interests: list[str] = field(default_factory=list)
    boundaries: list[str] = field(default_factory=list)
    finished: bool = False

    @classmethod
    def start(cls, profile: OnboardingProfile) -> OnboardingDeps:
        """A working copy of what is stored."""
        return cls(profile.name, profile.timezone, list(profile.interests), list(profile.boundaries))


onboarding_agent: Agent[OnboardingDeps, str] = Agent(
    deps_type=OnboardingDeps, name="nikita-onboarding", defer_model_check=True, retries=2
)


@onboarding_agent.tool
async def set_name(ctx: RunContext[OnboardingDeps], name: str) -> str:
    """Save the name the person wants to be called."""
    cleaned = " ".join(name.split())[:100]
    if not cleaned:
        raise ModelRetry("the name is empty; pass the name the person gave")
    ctx.deps.name = cleaned
    return f"saved name: {cleaned}"


@onboarding_agent.tool
async def set_timezone(ctx: RunContext[OnboardingDeps], place_or_zone: str) -> str:
    """Save where the person is: a city (in the person's own words and language, with the country or
    state if they gave one), a country or an IANA time zone such as "Europe/Lisbon"."""
    zone = await lookup_timezone(place_or_zone)
    if zone is None:
        raise ModelRetry(
            f"{place_or_zone!r} is not a time zone or a city I know; try the nearest big city "
            "or an IANA name like Europe/Lisbon, or ask the person"
        )
    if isinstance(zone, Ambiguous):
        choices = "; ".join(choice.label for choice in zone.choices)
        return (
            f"not saved: there are several places called {zone.name} ({choices}). Ask the person which "
            "one they mean, then call set_timezone again with the city and its state or country"
        )
    ctx.deps.timezone = zone
    return f"saved time zone: {zone}"


@onboarding_agent.tool
async def add_interest(ctx: RunContext[OnboardingDeps], interest: str) -> str:
    """Save one interest or thing going on in the person's life."""
    cleaned = " ".join(interest.split())[:200]
    if cleaned and cleaned.lower() not in {i.lower() for i in ctx.deps.interests}:
        ctx.deps.interests.append(cleaned)
    return f"interests now: {', '.join(ctx.deps.interests)}"


@onboarding_agent.tool
async def add_boundary(ctx: RunContext[OnboardingDeps], boundary: str) -> str:
    """Save one boundary: a topic to avoid or how the person wants to be talked to."""
    cleaned = " ".join(boundary.split())[:200]
    if cleaned and cleaned.lower() not in {b.lower() for b in ctx.deps.boundaries}:
        ctx.deps.boundaries.append(cleaned)
    return f"boundaries now: {'; '.join(ctx.deps.boundaries)}"


# A barrier: the model often calls set_timezone and finish_onboarding in one response, and the
# look-up in set_timezone awaits, so run side by side the check here would not see its zone yet.
@onboarding_agent.tool(sequential=True)
async def finish_onboarding(ctx: RunContext[OnboardingDeps]) -> str:
    """Finish onboarding once the name and the place are known; the normal conversation starts next."""
    missing = [
        name for name, value in (("name", ctx.deps.name), ("timezone", ctx.deps.timezone)) if not value
    ]
    if missing:
        raise ModelRetry(f"not finished: still missing {', '.join(missing)}; ask the person for it first")
    ctx.deps.finished = True
    return "onboarding finished"


@dataclass(frozen=True)
class OnboardingTurn:
    """The reply to one onboarding message and the profile it left behind."""

    text: str
    deps: OnboardingDeps
    failed: bool = False


FALLBACK_REPLY = (
    "Hi! I'm {persona_name}. Before we really start: what should I call you, and which city are you in "
    "(so I know your time of day)?"
)


async def run_onboarding_turn(
    context: OnboardingContext, message: str, *, model: Model | str, persona: Persona | None = None
) -> OnboardingTurn:
    """Run the onboarding agent on one message; a model failure gives a usable fallback question."""
    persona = persona or default_persona()
    deps = OnboardingDeps.start(context.profile)
    try:
        result = await onboarding_agent.run(
            None, message_history=build_messages(context, message, persona), deps=deps, model=model
        )
    except Exception as exc:
        # Any failure still gets an answer that is stored with the message; a database
        # that is briefly away is retried by the inbox instead.
        if is_transient(exc):
            raise
        extra = {"user_id": context.user_id}
        if isinstance(exc, AgentRunError | TimeoutError):
            logger.warning("onboarding model call failed", extra=extra, exc_info=exc)
        else:
            logger.exception("onboarding run failed", extra=extra)
        return OnboardingTurn(_fallback(deps, persona), OnboardingDeps.start(context.profile), failed=True)
    record_run("onboarding", result.usage)
    text = result.output.replace("\x00", "").strip() or _fallback(deps, persona)
    return OnboardingTurn(text, deps)


def _fallback(deps: OnboardingDeps, persona: Persona) -> str:
    if deps.name is None:
        return with_name(FALLBACK_REPLY, persona.name)
    if deps.timezone is None:
        return f"Sorry {deps.name}, I lost my train of thought. Which city are you in?"
    return "Sorry, I lost my train of thought for a second. Could you say that again?"


@dataclass(frozen=True)
class OnboardingReply:
    """What to send back for one onboarding message, and whether onboarding is now complete."""

    text: str
    complete: bool
    duplicate: bool = False
    failed: bool = False


class OnboardingService:
    """Routes a not-yet-onboarded user's messages through the onboarding agent and stores the result.

    Messages of onboarding are transcript rows of kind "onboarding" (so /export and the
    transcript keep them) outside any conversation, so the main agent's sessions start clean.
    """

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        queue: TurnQueue,
        model: Model | str,
        max_user_messages: int = 12,
        persona: Persona | None = None,
        budget: TokenBudget | None = None,
    ) -> None:
        self.sessions = sessions
        # Daily token caps (agent/turn/daily_tokens.py), checked before each onboarding model call.
        self.budget = budget or TokenBudget()
        self.queue = queue
        self.model = model
        self.persona = persona or default_persona()
        # A model that never calls finish_onboarding must not trap the user in onboarding.
        self.max_user_messages = max_user_messages

    async def handle(
        self,
        user_id: int,
        text: str,
        sent_at: datetime,
        *,
        telegram_message_id: int | None = None,
        fallback_name: str | None = None,
        receipt: TurnReceipt | None = None,
        held: bool = False,
    ) -> OnboardingReply | None:
        """Answer one message in onboarding; None when the user has completed onboarding already.

        Like `TurnService.reply`: a message stored and answered before is a repeated delivery; stored
        but unanswered (the process stopped mid-turn), it is answered now without being stored again.
        `receipt` runs inside the transaction that stores the answer; `held` as in `TurnService.reply`.
        """
        text = text.replace("\x00", "")
        async with self.queue.serial(user_id, held=held):
            async with self.sessions() as session:
                user = await session.get(User, user_id)
                if user is None:
                    raise UserNotFoundError(f"no user with id {user_id}")
                if user.onboarding_status == "complete":
                    return None
                found = await delivered(session, user_id, telegram_message_id)
                if found is not None and found.answer is not None:
                    return OnboardingReply(found.answer.content, False, duplicate=True)
                stored = found.message if found is not None else None
            if stored is None:
                context = await load_context(self.sessions, user, sent_at)
                message_id, user_messages = await self._store_user_message(
                    user_id, text, sent_at, telegram_message_id
                )
            else:
                text, message_id = stored.content, stored.id
                context = await load_context(self.sessions, user, sent_at, before_id=stored.id)
                user_messages = await self._count_user_messages(user_id)
            over = await self.budget.over(self.sessions, user_id, sent_at)
            with metering() as meter:
                if over is None:
                    turn = await run_onboarding_turn(context, text, model=self.model, persona=self.persona)
                else:
                    logger.info("token budget reached", extra={"user_id": user_id, "budget": over})
                    turn = OnboardingTurn(BUDGET_REPLY, OnboardingDeps.start(context.profile))
                    receipt = counting(receipt, over, sent_at)
            deps = turn.deps
            if not deps.finished and user_messages >= self.max_user_messages:
                deps.name = deps.name or fallback_name or "friend"
                deps.finished = True
            await self._persist(user_id, message_id, turn.text, sent_at, deps, receipt, meter)
            return OnboardingReply(turn.text, deps.finished, failed=turn.failed)

    async def complete_with_defaults(
        self, user_id: int, fallback_name: str | None, *, held: bool = False
    ) -> None:
        """Skip the rest of onboarding: keep what was collected, fill the name from the fallback."""
        async with self.queue.serial(user_id, held=held), self.sessions() as session, session.begin():
            user = await session.get(User, user_id)
            if user is None:
                raise UserNotFoundError(f"no user with id {user_id}")
            user.name = user.name or fallback_name
            user.onboarding_status = "complete"

    async def _store_user_message(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None
    ) -> tuple[int, int]:
        async with self.sessions() as session, session.begin():
            user = await session.get(User, user_id)
            assert user is not None
            user.onboarding_status = "in_progress"
            if user.last_message_at is None or sent_at > user.last_message_at:
                user.last_message_at = sent_at
            row = await write_message(
                session,
                user,
                role="user",
                content=text,
                sent_at=sent_at,
                kind=KIND,
                telegram_message_id=telegram_message_id,
                in_day=False,
            )
        return row.id, await self._count_user_messages(user_id)

    async def _count_user_messages(self, user_id: int) -> int:
        async with self.sessions() as session:
            count = await session.scalar(
                select(func.count())
                .select_from(TranscriptMessage)
                .where(
                    TranscriptMessage.user_id == user_id,
                    TranscriptMessage.kind == KIND,
                    TranscriptMessage.role == "user",
                )
            )
        return int(count or 0)

    async def _persist(
        self,
        user_id: int,
        message_id: int,
        text: str,
        at: datetime,
        deps: OnboardingDeps,
        receipt: TurnReceipt | None,
        meter: UsageMeter,
    ) -> None:
        async with self.sessions() as session, session.begin():
            user = await session.get(User, user_id)
            if user is None:  # forgotten while the model was thinking
                return
            await write_message(
                session,
                user,
                role="assistant",
                content=text,
                sent_at=at,
                kind=KIND,
                reply_to_id=message_id,
                in_day=False,
            )
            profile = dict(user.profile or {})
            profile.update(interests=list(deps.interests), boundaries=list(deps.boundaries))
            if deps.timezone is not None:
                user.timezone = deps.timezone
                profile["timezone_confirmed"] = True
                await move_to_zone(session, user_id, deps.timezone)  # reminders keep their local time
            user.profile = profile
            user.name = deps.name or user.name
            if deps.finished:
                user.onboarding_status = "complete"
            if receipt is not None:
                await receipt(session, text)
            # Last in the transaction (agent/core/usage.py).
            await store_usage(session, user_id, at.astimezone(UTC).date(), meter)
