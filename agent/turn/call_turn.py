"""Finished voice calls, stored as a turn of the turn frame (agent/turn/frame.py) that calls no model.

A call is stored as transcript rows of kind `voice` at their own times in their users' day segments,
in a conversation of kind `voice` that is closed at once, so post-processing (jobs/queue.py) claims it
like any ended conversation; the text conversation it interrupts is closed too. The frame finds a call
stored before by its call id, which is unique, so a webhook delivered twice stores the call once. It
queues behind the user's other turns in this process (agent/turn/serial.py); a Telegram turn running
meanwhile, here or on another instance, keeps its own messages, because a turn appends and counts
them in one statement.

The voice surface (agent/voice/) reads the call from its webhook and hands over what is stored here,
with its own check of whether the user's memory takes the write (`MayWrite`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar, Literal

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.turn.daily_tokens import Over
from agent.turn.frame import Done, Stored, Turn
from agent.turn.transcript import write_message
from db.models import QUEUED, Conversation, DaySegment, User
from db.repositories.conversations import ConversationRepository
from db.repositories.day_summaries import flag_summary_due

logger = logging.getLogger(__name__)

# The user, when their memory may take a write in this session (None: gone, or forgotten).
MayWrite = Callable[[AsyncSession, int], Awaitable[User | None]]


@dataclass(frozen=True)
class SpokenTurn:
    """One spoken turn of a call at its time."""

    role: Literal["user", "assistant"]
    text: str
    at: datetime


@dataclass(frozen=True)
class FinishedCall:
    """What a finished call stores: its id (unique), when it started and ended, its turns in order."""

    call_id: str
    started_at: datetime
    ended_at: datetime
    turns: tuple[SpokenTurn, ...]


@dataclass(frozen=True)
class StoredCall:
    """Where a call went: its conversation, how many turns were stored, whether it was known already."""

    conversation_id: int
    messages: int
    duplicate: bool = False
    closed_text_conversation_id: int | None = None


@dataclass(kw_only=True)
class CallTurn(Turn[StoredCall, None, StoredCall | None]):
    """A finished call, stored as a turn that calls no model: found by its call id when known."""

    call: FinishedCall
    may_write: MayWrite
    calls_model: ClassVar[bool] = False

    async def earlier(self, session: AsyncSession) -> Done[StoredCall | None] | None:
        """The call stored before (a webhook delivered twice), by its call id."""
        row = (
            await session.execute(
                select(Conversation.id, Conversation.message_count).where(
                    Conversation.call_id == self.call.call_id
                )
            )
        ).one_or_none()
        return Done(StoredCall(row.id, row.message_count, duplicate=True)) if row is not None else None

    async def take(self, session: AsyncSession) -> StoredCall | Done[StoredCall | None]:
        """The call's conversation and transcript, in the days it touched."""
        user, call, user_id = await self.may_write(session, self.user_id), self.call, self.user_id
        if user is None:
            return Done(None)
        conversations = ConversationRepository(session)
        closed_id: int | None = None
        active = await conversations.active_for(user_id)
        # A call ends the text conversation it interrupts; the next message starts afresh after it.
        if active is not None and active.last_message_at <= call.started_at:
            await conversations.end_and_queue(active, active.last_message_at)
            closed_id = active.id
        last_at = call.turns[-1].at if call.turns else call.ended_at
        conversation = Conversation(
            user_id=user_id,
            kind="voice",
            call_id=call.call_id,
            status=QUEUED,  # a call is over when it is stored: queued for post-processing at once
            started_at=call.started_at,
            last_message_at=last_at,
            ended_at=call.ended_at,
            messages=[],
            message_count=len(call.turns),
        )
        session.add(conversation)
        await session.flush()
        segments = await self._transcribe(session, user, conversation.id)
        settings = self.kit.settings
        for segment in segments.values():
            await flag_summary_due(
                session,
                segment,
                threshold=settings.day_summary_message_threshold,
                token_budget=settings.day_raw_token_budget,
                count_tokens=self.kit.counter.count,
            )
        if user.last_message_at is None or last_at > user.last_message_at:
            user.last_message_at = last_at
        return StoredCall(conversation.id, len(call.turns), closed_text_conversation_id=closed_id)

    async def _transcribe(
        self, session: AsyncSession, user: User, conversation_id: int
    ) -> dict[int, DaySegment]:
        """Store the call's turns; returns the day segments they went into."""
        segments: dict[int, DaySegment] = {}
        for turn in self.call.turns:
            row = await write_message(
                session,
                user,
                role=turn.role,
                content=turn.text,
                sent_at=turn.at,
                kind="voice",
                conversation_id=conversation_id,
            )
            if row.day_segment_id is not None and row.day_segment_id not in segments:
                segment = await session.get(DaySegment, row.day_segment_id)  # in the identity map
                assert segment is not None
                segments[row.day_segment_id] = segment
        return segments

    async def answer(self, taken: StoredCall, over: Over | None) -> None:
        """A call is answered while it happens: nothing to answer now."""

    async def store(
        self, session: AsyncSession, taken: StoredCall, answer: None
    ) -> Stored[StoredCall | None]:
        """Everything was written with the call: no answer to send, no usage."""
        return Stored(taken, None)

    async def after(self, taken: StoredCall, answer: None, result: StoredCall | None) -> None:
        """Log the stored call."""
        logger.info(
            "voice call stored",
            extra={
                "user_id": self.user_id,
                "conversation_id": taken.conversation_id,
                "messages": taken.messages,
            },
        )
