"""Onboarding's turns: a not-yet-onboarded user's messages answered by the onboarding agent
(agent/onboarding/agent.py).

Each message is a turn in the turn frame (agent/turn/frame.py), like a chat turn: serialised with
the user's other turns, stored before the model is called, found again when delivered twice
(answered once), refused over a daily token cap, metered, and stored with its answer and the
profile the agent's tools collected in one transaction. What is onboarding's own: its messages are
transcript rows of kind "onboarding" (so /export and the transcript keep them) outside any
conversation and any day, so the main agent's conversations start clean; a user whose onboarding
is complete gets no onboarding turn.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.chat.persona import persona_for
from agent.core.errors import UserNotFoundError
from agent.onboarding.agent import OnboardingDeps, OnboardingRun, run_onboarding
from agent.onboarding.context import KIND, load_context
from agent.reminders.store import move_to_zone
from agent.turn.daily_tokens import CAP_REPLY, Over
from agent.turn.frame import Done, Stored, Turn
from agent.turn.transcript import Repeat, person_in, store_answer, store_said
from db.models import TranscriptMessage, User

# A model that never calls finish_onboarding must not trap the user in onboarding.
MAX_USER_MESSAGES = 12


@dataclass(frozen=True)
class OnboardingReply:
    """What to send back for one onboarding message ("" when nothing: the user was forgotten while
    the model was thinking), and whether onboarding is now complete; `duplicate`: stored before."""

    text: str
    complete: bool
    duplicate: bool = False
    failed: bool = False


@dataclass(frozen=True)
class Taken:
    """An onboarding message stored and about to be answered."""

    user: User
    message_id: int
    text: str
    user_messages: int  # the user's onboarding messages so far, this one included


@dataclass(kw_only=True)
class OnboardingTurn(Turn[Taken, OnboardingRun, OnboardingReply | None]):
    """One onboarding message, answered by the onboarding agent in the turn frame."""

    fallback_name: str | None = None

    async def earlier(self, session: AsyncSession) -> Taken | Done[OnboardingReply | None] | None:
        """Nothing for a user whose onboarding is complete; otherwise a message stored before."""
        user = await person_in(session, self.message)
        if user is None:
            raise UserNotFoundError(f"no user with id {self.user_id}")
        if user.onboarding_status == "complete":
            return Done(None)
        return await super().earlier(session)

    async def resume(self, session: AsyncSession, found: Repeat) -> Taken | Done[OnboardingReply | None]:
        """The first answer again, or the stored message answered now."""
        if found.answer is not None:
            return Done(OnboardingReply(found.answer.content, False, duplicate=True))
        user = await session.get(User, self.user_id)
        assert user is not None  # read by `earlier` in this session
        message = found.message
        return Taken(user, message.id, message.content, await _user_messages(session, self.user_id))

    async def take(self, session: AsyncSession) -> Taken:
        """Store the message outside any conversation and day; onboarding is in progress now."""
        user = await session.get(User, self.user_id)
        assert user is not None  # read by `earlier` in this session
        user.onboarding_status = "in_progress"
        row = await store_said(session, user, self.message, kind=KIND, in_day=False)
        return Taken(user, row.id, self.message.text, await _user_messages(session, self.user_id))

    async def answer(self, taken: Taken, over: Over | None) -> OnboardingRun:
        """Run the onboarding agent on the messages before this one (over a daily cap: no model call)."""
        kit = self.kit
        context = await load_context(kit.sessions, taken.user, self.at, before_id=taken.message_id)
        if over is None:
            persona = persona_for(kit.settings)
            run = await run_onboarding(context, taken.text, model=kit.model, persona=persona)
        else:
            run = OnboardingRun(CAP_REPLY, OnboardingDeps.start(context.profile))
        deps = run.deps
        if not deps.finished and taken.user_messages >= MAX_USER_MESSAGES:
            deps.name = deps.name or self.fallback_name or "friend"
            deps.finished = True
        return run

    async def store(
        self, session: AsyncSession, taken: Taken, answer: OnboardingRun
    ) -> Stored[OnboardingReply | None]:
        """The answer and the profile the tools collected (complete once finished)."""
        deps, reply = answer.deps, OnboardingReply(answer.text, answer.deps.finished, failed=answer.failed)
        user = await session.get(User, self.user_id)
        if user is None:  # forgotten while the model was thinking
            return Stored(OnboardingReply("", False), None)
        _ = await store_answer(
            session, user, self.message, said_id=taken.message_id, text=answer.text, kind=KIND, in_day=False
        )
        profile = dict(user.profile or {})
        profile.update(interests=list(deps.interests), boundaries=list(deps.boundaries))
        if deps.timezone is not None:
            user.timezone = deps.timezone
            profile["timezone_confirmed"] = True
            await move_to_zone(session, self.user_id, deps.timezone)  # reminders keep their local time
        user.profile = profile
        user.name = deps.name or user.name
        if deps.finished:
            user.onboarding_status = "complete"
        return Stored(reply, answer.text)


async def _user_messages(session: AsyncSession, user_id: int) -> int:
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
