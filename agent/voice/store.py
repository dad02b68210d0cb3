"""Every write the voice surface makes, each behind `_may_write`: the one place a /forget tombstone
is to be checked before a call's transcript or a voice fact reaches the memory.

A call is stored as a turn of the turn frame (agent/turn/frame.py) that calls no model: transcript
rows of kind `voice` at their own times in their users' day segments, in a conversation of kind
`voice` that is closed at once, so post-processing (jobs/queue.py) claims it like any ended session.
The frame finds a call stored before by its call id, which is unique, so a webhook delivered twice
stores the call once. It queues behind the user's other turns in this process
(agent/turn/serial.py); a Telegram turn running meanwhile, here or on another instance, keeps its own
messages, because a turn appends and counts them in one statement.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.memory.facts import FactAdded
from agent.memory.service import Facts
from agent.turn.daily_tokens import Over
from agent.turn.frame import Done, Stored, Turn, TurnFrame
from agent.turn.transcript import write_message
from agent.voice.calls import EndedCall
from db.models import QUEUED, Conversation, DaySegment, User
from db.repositories.conversations import ConversationRepository
from db.repositories.day_summaries import flag_summary_due
from db.repositories.prompts import PromptRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StoredCall:
    """Where a call went: its conversation, how many turns were stored, whether it was known already."""

    conversation_id: int
    messages: int
    duplicate: bool = False
    closed_text_conversation_id: int | None = None


class VoiceStore:
    """Writes voice facts, call transcripts and call-start snapshots for one user at a time."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        facts: Facts,
        frame: TurnFrame,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.facts = facts
        # The turn service's frame: in this process a call is stored as a turn, never beside a text turn.
        self.frame = frame
        self.counter = get_counter()

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

    async def store_call(self, user_id: int, call: EndedCall) -> StoredCall | None:
        """Store a finished call once (by call id); None when the user's memory takes no writes."""
        return await self.frame.run(
            CallTurn(voice=self, key=user_id, user_id=user_id, at=call.ended_at, call=call)
        )

    async def _transcribe(
        self, session: AsyncSession, user: User, conversation_id: int, call: EndedCall
    ) -> dict[int, DaySegment]:
        """Store the call's turns; returns the day segments they went into."""
        segments: dict[int, DaySegment] = {}
        for turn in call.turns:
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


@dataclass(kw_only=True)
class CallTurn(Turn[StoredCall, None, StoredCall | None]):
    """A finished call, stored as a turn that calls no model: found by its call id when known."""

    voice: VoiceStore
    key: int
    user_id: int
    at: datetime
    call: EndedCall
    calls_model: bool = False

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
        user, call, user_id = await self.voice._may_write(session, self.user_id), self.call, self.user_id
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
        segments = await self.voice._transcribe(session, user, conversation.id, call)
        for segment in segments.values():
            await flag_summary_due(
                session,
                segment,
                threshold=self.voice.settings.day_summary_message_threshold,
                token_budget=self.voice.settings.day_raw_token_budget,
                count_tokens=self.voice.counter.count,
            )
        if user.last_message_at is None or last_at > user.last_message_at:
            user.last_message_at = last_at
        return StoredCall(conversation.id, len(call.turns), closed_text_conversation_id=closed_id)

    async def answer(self, taken: StoredCall, over: Over | None) -> None:
        """A call is answered while it happens: nothing to answer now."""

    async def store(
        self, session: AsyncSession, taken: StoredCall, answer: None
    ) -> Stored[StoredCall | None]:
        """Everything was written with the call: no receipt, no usage."""
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
