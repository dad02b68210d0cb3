"""`TurnService.reply`: the one Telegram-free entry point that answers a user's message.

A turn reads in order: take the message in (agent/turn/intake.py: stored in its session, or found
stored before, and the user's token budget checked in the same transaction), build the context,
run the chat agent (agent/turn/run.py: a failure becomes an apology), then store the answer, the
grown history, the context snapshot and the usage in one transaction. A surface that must answer
each message exactly once passes a `TurnReceipt`; it runs inside that transaction, so "answered"
and "the surface knows what to send" commit together.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.chat import attachments as files
from agent.chat.agent import build_chat_model
from agent.chat.deps import TurnDeps
from agent.chat.persona import persona_for
from agent.chat.streaming import TurnProgress
from agent.context import BuiltContext, ContextBuilder
from agent.core.clock import Clock, ensure_utc
from agent.core.settings import Settings
from agent.core.usage import UsageMeter, metering, store_usage
from agent.history.cache import SessionHistories, StoredHistory
from agent.history.tokens import get_counter
from agent.search.recall import Recall
from agent.turn.daily_tokens import BUDGET_REPLY, Over, TokenBudget, counting
from agent.turn.intake import MessageIntake, Prepared
from agent.turn.run import Outcome, run_chat
from agent.turn.serial import TurnQueue
from agent.turn.transcript import Delivered, TurnReceipt, write_message
from db.models import DaySegment, TranscriptMessage
from db.repositories.conversations import ConversationRepository
from db.repositories.day_summaries import flag_summary_due
from db.repositories.prompts import PromptRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TurnResult:
    """The answer to one message and where it was stored."""

    text: str
    conversation_id: int
    message_id: int
    reply_id: int | None
    new_session: bool
    closed_conversation_id: int | None = None
    duplicate: bool = False
    failed: bool = False


class TurnService:
    """Runs turns: one user's at a time, different users' side by side."""

    def __init__(
        self,
        *,
        settings: Settings,
        engine: AsyncEngine,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock | None = None,
        context_builder: ContextBuilder | None = None,
        model: Model | str | None = None,
        recall: Recall | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.clock = clock or Clock()
        self.queue = TurnQueue()
        self.context_builder = context_builder or ContextBuilder(settings)
        self.model: Model | str = model if model is not None else build_chat_model(settings)
        self.counter = get_counter()
        # Conversation search and memory tools; None leaves the tools answering "unavailable".
        self.recall = recall
        # Daily token caps, checked before each turn's model call (agent/turn/daily_tokens.py).
        self.budget = TokenBudget.from_settings(settings)
        self.histories = SessionHistories(
            max_sessions=settings.history_cache_sessions, max_bytes=settings.history_cache_max_bytes
        )
        reply_window = timedelta(hours=settings.proactive_reply_window_hours)
        self.intake = MessageIntake(sessions, self.histories, self.session_timeout, reply_window, self.budget)
        self._background: set[asyncio.Task[object]] = set()

    async def settle(self) -> None:
        """Wait for the background work of finished turns (indexing)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)
            # Finished tasks leave the set in their done callbacks, which the loop runs later; a gather
            # of tasks that are all done already returns without yielding, so without this the loop
            # never gets to run those callbacks and this spins forever.
            await asyncio.sleep(0)

    async def close(self) -> None:
        """Finish background work and release what the service holds beyond the shared engine."""
        await self.settle()

    @property
    def session_timeout(self) -> timedelta:
        """How long a pause ends a session."""
        return timedelta(minutes=self.settings.session_timeout_minutes)

    async def reply(
        self,
        user_id: int,
        text: str,
        sent_at: datetime,
        *,
        telegram_message_id: int | None = None,
        receipt: TurnReceipt | None = None,
        progress: TurnProgress | None = None,
        kind: str = "text",
        attachments: Sequence[files.Attachment] = (),
        held: bool = False,
    ) -> TurnResult:
        """Answer one message; the message is stored before the model is called and never lost.

        With `progress`, the answer is streamed to it while the model writes (a preview only).
        With `attachments` (photos, text files), `text` is how the transcript shows the message
        ("[photo] caption"); the model sees the files this turn only (agent/chat/attachments.py).
        `held`: the caller's inbox lease already serialises the conversation's turns (agent/turn/serial.py).
        """
        sent_at = ensure_utc(sent_at)
        text = text.replace("\x00", "")  # what the model reads is what is stored (PostgreSQL refuses NUL)
        async with self.queue.serial(user_id, held=held):
            taken = await self.intake.take(user_id, text, sent_at, telegram_message_id, kind)
            if isinstance(taken, Delivered):
                return _repeated(taken)
            prepared = replace(taken, attachments=tuple(attachments))
            stored = await self.histories.load(
                # The count includes this turn's user message, stored a moment ago.
                self.sessions,
                prepared.conversation.id,
                prepared.conversation.message_count - 1,
            )
            if prepared.over is not None:
                return await self._refuse(prepared, stored, sent_at, receipt, prepared.over)
            # Every model call of the turn (compaction, the chat run) counts towards the user's usage.
            with metering() as meter:
                return await self._answer(prepared, stored, sent_at, receipt, meter, progress)

    async def _refuse(
        self,
        prepared: Prepared,
        stored: StoredHistory,
        sent_at: datetime,
        receipt: TurnReceipt | None,
        over: Over,
    ) -> TurnResult:
        # Over a daily token cap: the message stays stored and gets BUDGET_REPLY, without a model call.
        logger.info("token budget reached", extra={"user_id": prepared.user.id, "budget": over})
        exchange: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(prepared.text, timestamp=sent_at)]),
            ModelResponse(parts=[TextPart(BUDGET_REPLY)], timestamp=sent_at),
        ]
        outcome = Outcome(BUDGET_REPLY, exchange, prepared.text)
        counted = counting(receipt, over, sent_at)
        reply_id = await self._persist(
            prepared, stored, outcome, None, sent_at, "budget", counted, UsageMeter()
        )
        return _result(prepared, outcome, reply_id)

    async def _answer(
        self,
        prepared: Prepared,
        stored: StoredHistory,
        sent_at: datetime,
        receipt: TurnReceipt | None,
        meter: UsageMeter,
        progress: TurnProgress | None,
    ) -> TurnResult:
        user, conversation = prepared.user, prepared.conversation
        # Tiers, compaction and the budget (history included) in one place; each tier in its own session.
        context = await self.context_builder.build(
            self.sessions,
            user=user,
            conversation=conversation,
            text=prepared.text,
            now=sent_at,
            previous_message_at=prepared.previous_message_at,
            history=stored.messages,
        )
        deps = TurnDeps(
            user_id=user.id,
            conversation_id=conversation.id,
            now=sent_at,
            timezone=user.timezone,
            sessions=self.sessions,
            persona=persona_for(self.settings).chat,
            memory=context.memory,
            note=context.note,
            recall=self.recall,
            message_id=prepared.message_id,
        )
        outcome = await run_chat(
            deps,
            prepared.text,
            # None on a session's first message: the instructions start the run fresh.
            history=context.history,
            model=self.model,
            settings=self.settings,
            sent_at=sent_at,
            attachments=prepared.attachments,
            progress=progress,
        )
        kind = "apology" if outcome.failed else "stopped" if outcome.stopped else "text"
        reply_id = await self._persist(prepared, stored, outcome, context, sent_at, kind, receipt, meter)
        if self.recall is not None:
            # Full text was indexed in the transactions (triggers / generated columns); embeddings
            # follow in the background, so the reply never waits for the embedder and a failure
            # never reaches it (every search catches up on what is missing first).
            task = asyncio.create_task(self.recall.index_quietly(user.id, now=sent_at))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return _result(prepared, outcome, reply_id)

    async def _persist(
        self,
        prepared: Prepared,
        stored: StoredHistory,
        outcome: Outcome,
        context: BuiltContext | None,
        at: datetime,
        reply_kind: str,
        receipt: TurnReceipt | None,
        meter: UsageMeter,
    ) -> int:
        # The full stored history grows (the cached copy is what is stored, as of its message count:
        # agent/history/cache.py); trimming only shapes what the model is sent.
        updated = stored.extended(outcome.new_messages, prepared.conversation.message_count + 1)
        async with self.sessions() as session, session.begin():
            # One statement: the history written and counted, or nothing when /forget deleted the
            # conversation while the model was thinking.
            count = await ConversationRepository(session).append_turn(
                prepared.conversation.id,
                updated.raw[len(stored.raw) :],
                whole=updated.raw if stored.stale else None,
            )
            if count is None:
                return 0
            if count != updated.version:  # the row moved under us: the cache must not claim it
                updated = replace(updated, version=count)
            if outcome.text != prepared.text:
                # The description the model gave of the files replaces the placeholder, for search
                # and summaries.
                message = await session.get(TranscriptMessage, prepared.message_id)
                if message is not None:
                    message.content = outcome.text
            reply = await write_message(
                session,
                prepared.user,
                role="assistant",
                content=outcome.answer,
                sent_at=at,
                kind=reply_kind,
                conversation_id=prepared.conversation.id,
                reply_to_id=prepared.message_id,
            )
            # The reply's day segment, still in the session's identity map: no query.
            segment = await session.get(DaySegment, reply.day_segment_id)
            assert segment is not None
            # Only a flag: the day-summaries job summarises, never the user's turn.
            await flag_summary_due(
                session,
                segment,
                threshold=self.settings.day_summary_message_threshold,
                token_budget=self.settings.day_raw_token_budget,
                count_tokens=self.counter.count,
            )
            if context is not None:  # None: no model call, so no context was built
                await PromptRepository(session).add(
                    user_id=prepared.user.id,
                    conversation_id=prepared.conversation.id,
                    message_id=prepared.message_id,
                    instructions=context.text,
                    snapshot={**context.snapshot, "model_failed": outcome.failed},
                    created_at=at,
                )
            if receipt is not None:
                await receipt(session, outcome.answer)
            # Last: it locks the day's token counter until the commit (db/usage_ddl.py).
            await store_usage(session, prepared.user.id, at.astimezone(UTC).date(), meter)
        self.histories.remember(prepared.conversation.id, updated, user_id=prepared.user.id)
        return reply.id


def _result(prepared: Prepared, outcome: Outcome, reply_id: int) -> TurnResult:
    return TurnResult(
        text=outcome.answer,
        conversation_id=prepared.conversation.id,
        message_id=prepared.message_id,
        reply_id=reply_id,
        new_session=prepared.new_session,
        closed_conversation_id=prepared.closed_id,
        failed=outcome.failed,
    )


def _repeated(found: Delivered) -> TurnResult:
    """A message delivered again: the answer stored the first time (none if it never got one)."""
    message, answer = found.message, found.answer
    logger.info("duplicate delivery", extra={"user_id": message.user_id, "message_id": message.id})
    return TurnResult(
        text=answer.content if answer else "",
        conversation_id=message.conversation_id or 0,
        message_id=message.id,
        reply_id=answer.id if answer else None,
        new_session=False,
        duplicate=True,
    )
