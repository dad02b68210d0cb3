"""A private chat's turn: the chat agent answers one message, in the turn frame (agent/turn/frame.py).

What is the chat's own: the message is taken in by the `MessageArrival` (stored in its session, or a
message stored before but never answered resumed), the context is built, the chat agent runs
(agent/turn/run.py: a failure becomes an apology; over a daily cap the refusal is stored without
a model call), and the grown history, the answer, the summary flag and the context snapshot are
stored. The frame serialises, finds repeats, reads the daily caps, meters, and commits all
of it with the usage; the result carries the answer for the caller to send.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import ClassVar

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.settings import ModelSettings
from sqlalchemy.ext.asyncio import AsyncSession

from agent.chat import attachments as files
from agent.chat.agent import chat_model_settings
from agent.chat.deps import TurnDeps
from agent.chat.persona import persona_for
from agent.chat.streaming import TurnProgress
from agent.context import BuiltContext
from agent.history.cache import StoredHistory
from agent.turn.arrival import Prepared
from agent.turn.daily_tokens import CAP_REPLY, Over
from agent.turn.frame import Done, Stored, Turn
from agent.turn.run import Outcome, run_chat
from agent.turn.transcript import Repeat, store_answer
from db.models import DaySegment, TranscriptMessage
from db.repositories.conversations import ConversationRepository
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.day_summaries import flag_summary_due
from db.repositories.prompts import PromptRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnResult:
    """The answer to one message and where it was stored.

    `text` is the answer to send ("" when there is none: the user was forgotten while the model was
    thinking); `duplicate`: it was stored before, for an earlier delivery of the same message.
    """

    text: str
    conversation_id: int
    message_id: int
    reply_id: int | None
    new_conversation: bool
    closed_conversation_id: int | None = None
    duplicate: bool = False
    failed: bool = False


@dataclass(frozen=True)
class Answered:
    """A chat turn's answer before it is stored, and what it was built from."""

    outcome: Outcome
    stored: StoredHistory
    context: BuiltContext | None  # None: refused without a model call, so no context was built
    kind: str


@dataclass(kw_only=True)
class ChatTurn(Turn[Prepared, Answered, TurnResult]):
    """A private chat's message answered by the chat agent, in the turn frame."""

    looks_first: ClassVar[bool] = False
    attachments: tuple[files.Attachment, ...] = ()
    progress: TurnProgress | None = None
    updated: StoredHistory | None = None  # the history as stored, for the cache after the commit

    def instructions(self) -> str:
        """The persona prompt the agent runs with."""
        return persona_for(self.kit.settings).chat

    def model_settings(self) -> ModelSettings:
        """The chat model's settings: a private chat's turns come minutes apart (5-minute cache)."""
        return chat_model_settings(self.kit.settings)

    async def resume(self, session: AsyncSession, found: Repeat) -> Prepared | Done[TurnResult]:
        """Answer a message stored in a conversation but never answered; anything else was answered."""
        if found.answer is not None or found.message.conversation_id is None:
            return Done(_repeated(found))
        return await self.kit.arrival.resume(session, found.message)

    async def take(self, session: AsyncSession) -> Prepared:
        """Store the message in its session."""
        return await self.kit.arrival.store(session, self.message)

    async def answer(self, taken: Prepared, over: Over | None) -> Answered:
        """Build the context and run the chat agent (a failure becomes an apology)."""
        kit, prepared = self.kit, replace(taken, attachments=self.attachments)
        stored = await kit.histories.load(
            # The count includes this turn's user message, stored a moment ago.
            kit.sessions,
            prepared.conversation.id,
            prepared.conversation.message_count - 1,
        )
        if over is not None:
            exchange: list[ModelMessage] = [
                ModelRequest(parts=[UserPromptPart(prepared.text, timestamp=self.at)]),
                ModelResponse(parts=[TextPart(CAP_REPLY)], timestamp=self.at),
            ]
            return Answered(Outcome(CAP_REPLY, exchange, prepared.text), stored, None, "budget")
        user, conversation = prepared.user, prepared.conversation
        # Tiers, compaction and the budget (history included) in one place; each tier in its own session.
        context = await kit.context_builder.build(
            kit.sessions,
            user=user,
            conversation=conversation,
            text=prepared.text,
            now=self.at,
            previous_message_at=prepared.previous_message_at,
            history=stored.messages,
        )
        deps = TurnDeps(
            user_id=user.id,
            conversation_id=conversation.id,
            now=self.at,
            timezone=user.timezone,
            sessions=kit.sessions,
            persona=self.instructions(),
            package_text=context.package_text,
            note=context.note,
            recall=kit.recall,
            facts=kit.facts,
            message_id=prepared.message_id,
            may_change_memory=self.message.may_change_memory,
        )
        outcome = await run_chat(
            deps,
            prepared.text,
            # None on a conversation's first message: the instructions start the run fresh.
            history=context.history,
            model=kit.model,
            model_settings=self.model_settings(),
            sent_at=self.at,
            attachments=prepared.attachments,
            progress=self.progress,
        )
        kind = "apology" if outcome.failed else "stopped" if outcome.stopped else "text"
        return Answered(outcome, stored, context, kind)

    async def store(self, session: AsyncSession, taken: Prepared, answer: Answered) -> Stored[TurnResult]:
        """The grown history, the answer, the summary flag and the context snapshot."""
        kit, outcome, stored, context = self.kit, answer.outcome, answer.stored, answer.context
        # The full stored history grows (the cached copy is what is stored, as of its message count:
        # agent/history/cache.py); trimming only shapes what the model is sent.
        updated = stored.extended(outcome.new_messages, taken.conversation.message_count + 1)
        # One statement: the history written and counted, or nothing when /forget deleted the
        # conversation while the model was thinking.
        count = await ConversationRepository(session).append_turn(
            taken.conversation.id,
            updated.raw[len(stored.raw) :],
            whole=updated.raw if stored.stale else None,
        )
        if count is None:
            return Stored(replace(_result(taken, outcome, 0), text=""), None)
        if count != updated.version:  # the row moved under us: the cache must not claim it
            updated = replace(updated, version=count)
        self.updated = updated
        if outcome.text != taken.text:
            # The description the model gave of the files replaces the placeholder, for search and
            # summaries.
            message = await session.get(TranscriptMessage, taken.message_id)
            if message is not None:
                message.content = outcome.text
        reply, day = await store_answer(
            session,
            taken.user,
            self.message,
            said_id=taken.message_id,
            text=outcome.answer,
            kind=answer.kind,
            conversation_id=taken.conversation.id,
            day_segment_id=taken.day_segment_id,
        )
        settings = kit.settings
        # Only a flag: the day-summaries job summarises, never the user's turn.
        if day is None and reply.day_segment_id is not None:  # the message's day was not known
            segment = await session.get(DaySegment, reply.day_segment_id)  # in the identity map
            assert segment is not None
            await flag_summary_due(
                session,
                segment,
                threshold=settings.day_summary_message_threshold,
                token_budget=settings.day_raw_token_budget,
                count_tokens=kit.counter.count,
            )
        elif day is not None and not day.summary_due and day.status == "open":
            said = outcome.text if outcome.text != taken.text else self.message.text
            due = day.messages_since_summary >= settings.day_summary_message_threshold
            if not due:
                tokens = await kit.day_text.tokens(session, day, (said, outcome.answer))
                due = tokens > settings.day_raw_token_budget
            if due:
                await DaySegmentRepository(session).mark_summary_due(day.id)
        if context is not None:
            await PromptRepository(session).add(
                user_id=taken.user.id,
                conversation_id=taken.conversation.id,
                message_id=taken.message_id,
                instructions=context.text,
                snapshot={
                    **context.snapshot,
                    "model_failed": outcome.failed,
                    "answered_ms": self.answered_ms,
                },
                created_at=self.at,
            )
        return Stored(_result(taken, outcome, reply.id), outcome.answer)

    async def after(self, taken: Prepared, answer: Answered, result: TurnResult) -> None:
        """Remember the stored history; start indexing the turn's embeddings."""
        if self.updated is not None:
            self.kit.histories.remember(taken.conversation.id, self.updated, user_id=taken.user.id)
        if answer.context is not None:
            self.kit.background.index(taken.user.id, self.at)


def _result(prepared: Prepared, outcome: Outcome, reply_id: int) -> TurnResult:
    return TurnResult(
        text=outcome.answer,
        conversation_id=prepared.conversation.id,
        message_id=prepared.message_id,
        reply_id=reply_id,
        new_conversation=prepared.new_conversation,
        closed_conversation_id=prepared.closed_id,
        failed=outcome.failed,
    )


def _repeated(found: Repeat) -> TurnResult:
    """A message delivered again: the answer stored the first time (none if it never got one)."""
    message, answer = found.message, found.answer
    logger.info("duplicate delivery", extra={"user_id": message.user_id, "message_id": message.id})
    return TurnResult(
        text=answer.content if answer else "",
        conversation_id=message.conversation_id or 0,
        message_id=message.id,
        reply_id=answer.id if answer else None,
        new_conversation=False,
        duplicate=True,
    )
