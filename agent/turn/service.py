"""`TurnService.reply`: the one Telegram-free entry point that answers a user's message.

A chat turn is a `ChatTurn` in the turn frame (agent/turn/frame.py), which serialises the user's
turns, takes the message in (agent/turn/intake.py: stored in its session, or found stored before),
reads the daily token budgets, meters the model calls and stores the answer with the caller's
`TurnReceipt` and the usage in one transaction. What is the chat's own: build the context, run the
chat agent (agent/turn/run.py: a failure becomes an apology), and store the grown history, the
answer, the summary flag and the context snapshot.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

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
from agent.history.cache import SessionHistories, StoredHistory
from agent.history.tokens import get_counter
from agent.search.recall import Recall
from agent.turn.daily_tokens import BUDGET_REPLY, Over, TokenBudget
from agent.turn.frame import Done, Stored, Turn, TurnFrame, clean
from agent.turn.intake import MessageIntake, Prepared
from agent.turn.locks import UserLocks
from agent.turn.run import Outcome, run_chat
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
        self.locks = UserLocks(engine)
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
        self.intake = MessageIntake(self.histories, self.session_timeout, reply_window)
        # Serialisation, repeated deliveries, budgets, metering and the receipt: every surface's turn.
        self.frame = TurnFrame(sessions=sessions, locks=self.locks, budget=self.budget)
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
        await self.locks.close()

    def index(self, user_id: int, at: datetime) -> None:
        """Embed what the user's turns stored, in the background."""
        if self.recall is None:
            return
        # Full text was indexed in the transactions (triggers / generated columns); embeddings follow
        # in the background, so the reply never waits for the embedder and a failure never reaches
        # it (every search catches up on what is missing first).
        task = asyncio.create_task(self.recall.index_quietly(user_id, now=at))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
    ) -> TurnResult:
        """Answer one message; the message is stored before the model is called and never lost.

        With `progress`, the answer is streamed to it while the model writes (a preview only).
        With `attachments` (photos, text files), `text` is how the transcript shows the message
        ("[photo] caption"); the model sees the files this turn only (agent/chat/attachments.py).
        """
        turn = ChatTurn(
            service=self,
            key=user_id,
            user_id=user_id,
            at=ensure_utc(sent_at),
            telegram_message_id=telegram_message_id,
            text=clean(text),
            kind=kind,
            attachments=tuple(attachments),
            progress=progress,
        )
        return await self.frame.run(turn, receipt=receipt)


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

    service: TurnService
    key: int
    user_id: int
    at: datetime
    telegram_message_id: int | None
    text: str
    kind: str
    attachments: tuple[files.Attachment, ...]
    progress: TurnProgress | None
    updated: StoredHistory | None = None  # the history as stored, for the cache after the commit

    async def resume(self, session: AsyncSession, found: Delivered) -> Prepared | Done[TurnResult]:
        """Answer a message stored in a session but never answered; anything else was answered."""
        if found.answer is not None or found.message.conversation_id is None:
            return Done(_repeated(found))
        return await self.service.intake.resume(session, found.message)

    async def take(self, session: AsyncSession) -> Prepared:
        """Store the message in its session."""
        return await self.service.intake.store(
            session, self.user_id, self.text, self.at, self.telegram_message_id, self.kind
        )

    async def answer(self, taken: Prepared, over: Over | None) -> Answered:
        """Build the context and run the chat agent (a failure becomes an apology)."""
        service, prepared = self.service, replace(taken, attachments=self.attachments)
        stored = await service.histories.load(
            # The count includes this turn's user message, stored a moment ago.
            service.sessions,
            prepared.conversation.id,
            prepared.conversation.message_count - 1,
        )
        if over is not None:
            exchange: list[ModelMessage] = [
                ModelRequest(parts=[UserPromptPart(prepared.text, timestamp=self.at)]),
                ModelResponse(parts=[TextPart(BUDGET_REPLY)], timestamp=self.at),
            ]
            return Answered(Outcome(BUDGET_REPLY, exchange, prepared.text), stored, None, "budget")
        user, conversation = prepared.user, prepared.conversation
        # Tiers, compaction and the budget (history included) in one place; each tier in its own session.
        context = await service.context_builder.build(
            service.sessions,
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
            sessions=service.sessions,
            persona=persona_for(service.settings).chat,
            memory=context.memory,
            note=context.note,
            recall=service.recall,
            message_id=prepared.message_id,
        )
        outcome = await run_chat(
            deps,
            prepared.text,
            # None on a session's first message: the instructions start the run fresh.
            history=context.history,
            model=service.model,
            settings=service.settings,
            sent_at=self.at,
            attachments=prepared.attachments,
            progress=self.progress,
        )
        kind = "apology" if outcome.failed else "stopped" if outcome.stopped else "text"
        return Answered(outcome, stored, context, kind)

    async def store(self, session: AsyncSession, taken: Prepared, answer: Answered) -> Stored[TurnResult]:
        """The grown history, the answer, the summary flag and the context snapshot."""
        service, outcome, stored, context = self.service, answer.outcome, answer.stored, answer.context
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
            return Stored(_result(taken, outcome, 0), None)
        if count != updated.version:  # the row moved under us: the cache must not claim it
            updated = replace(updated, version=count)
        self.updated = updated
        if outcome.text != taken.text:
            # The description the model gave of the files replaces the placeholder, for search and
            # summaries.
            message = await session.get(TranscriptMessage, taken.message_id)
            if message is not None:
                message.content = outcome.text
        reply = await write_message(
            session,
            taken.user,
            role="assistant",
            content=outcome.answer,
            sent_at=self.at,
            kind=answer.kind,
            conversation_id=taken.conversation.id,
            reply_to_id=taken.message_id,
        )
        # The reply's day segment, still in the session's identity map: no query.
        segment = await session.get(DaySegment, reply.day_segment_id)
        assert segment is not None
        # Only a flag: the day-summaries job summarises, never the user's turn.
        await flag_summary_due(
            session,
            segment,
            threshold=service.settings.day_summary_message_threshold,
            token_budget=service.settings.day_raw_token_budget,
            count_tokens=service.counter.count,
        )
        if context is not None:
            await PromptRepository(session).add(
                user_id=taken.user.id,
                conversation_id=taken.conversation.id,
                message_id=taken.message_id,
                instructions=context.text,
                snapshot={**context.snapshot, "model_failed": outcome.failed},
                created_at=self.at,
            )
        return Stored(_result(taken, outcome, reply.id), outcome.answer)

    async def after(self, taken: Prepared, answer: Answered, result: TurnResult) -> None:
        """Remember the stored history; start indexing the turn's embeddings."""
        if self.updated is not None:
            self.service.histories.remember(taken.conversation.id, self.updated, user_id=taken.user.id)
        if answer.context is not None:
            self.service.index(taken.user.id, self.at)


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
