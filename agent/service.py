"""`TurnService.reply`: the one Telegram-free entry point that answers a user's message.

Delivery: a surface that must answer each message exactly once passes a `TurnReceipt`;
it runs inside the transaction that stores the answer, so "answered" and "the surface knows what to
send" commit together. A message already stored under its Telegram id is never stored again: with
its answer stored it is a repeated delivery; without one (the process stopped mid-turn) its turn
runs now for the stored message. Whatever the agent run raises, the turn stores a paired
request/apology, except a transient database error, which the inbox retries (db/transient.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Protocol

from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent import attachments as files
from agent.agent import TurnDeps, build_chat_model, chat_agent, chat_model_settings
from agent.budget import BUDGET_REPLY, Over, TokenBudget, counting
from agent.clock import Clock, ensure_utc, local_day
from agent.context import BuiltContext, ContextBuilder
from agent.errors import UserNotFoundError
from agent.locks import UserLocks
from agent.persona import persona_for
from agent.search.recall import Recall
from agent.session_history import SessionHistories, StoredHistory
from agent.sessions import session_expired
from agent.settings import Settings
from agent.streaming import TurnProgress, can_stream, event_handler
from agent.tokens import get_counter
from agent.usage import UsageMeter, metering, record_run, store_usage
from db.memory_repositories import flag_summary_due
from db.models import Conversation, TranscriptMessage, User
from db.repositories import (
    ConversationRepository,
    DaySegmentRepository,
    PromptRepository,
    TranscriptRepository,
    UserRepository,
)
from db.transient import is_transient

logger = logging.getLogger(__name__)

APOLOGY = (
    "Sorry, I couldn't think straight just now (my language model didn't answer). "
    "Your message is saved; please try again in a moment."
)
FAULT_APOLOGY = (
    "Sorry, something went wrong on my side while I was thinking about that. "
    "Your message is saved; please try again in a moment."
)


class TurnReceipt(Protocol):
    """Runs inside the transaction that stores a turn's answer (a raise rolls the turn back)."""

    async def __call__(self, session: AsyncSession, answer: str) -> None:
        """Record, with the answer, whatever the caller needs to deliver it exactly once."""
        ...


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


@dataclass(frozen=True)
class _Prepared:
    user: User
    conversation: Conversation
    text: str
    message_id: int
    new_session: bool
    closed_id: int | None
    previous_message_at: datetime | None
    attachments: tuple[files.Attachment, ...] = ()


class TurnService:
    """Runs turns: session detection, context, history, model call, persistence."""

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
        # Daily token caps, checked before each turn's model call (agent/budget.py).
        self.budget = TokenBudget.from_settings(settings)
        self.histories = SessionHistories(
            max_sessions=settings.history_cache_sessions, max_bytes=settings.history_cache_max_bytes
        )
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
        ("[photo] caption"); the model sees the files this turn only (agent/attachments.py).
        """
        sent_at = ensure_utc(sent_at)
        text = text.replace("\x00", "")  # what the model reads is what is stored (PostgreSQL refuses NUL)
        async with self.locks.hold(user_id):
            prepared = await self._prepare(user_id, text, sent_at, telegram_message_id, kind)
            if isinstance(prepared, TurnResult):
                return prepared
            prepared = replace(prepared, attachments=tuple(attachments))
            over = await self.budget.over(self.sessions, user_id, sent_at)
            if over is not None:
                return await self._refuse(prepared, sent_at, receipt, over)
            return await self._run_and_persist(prepared, sent_at, receipt, progress)

    async def _prepare(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None, kind: str
    ) -> _Prepared | TurnResult:
        stored = await self._stored(user_id, telegram_message_id)
        if stored is None:
            try:
                return await self._store_user_message(user_id, text, sent_at, telegram_message_id, kind)
            except IntegrityError:
                # Another process stored the same Telegram message between our check and insert.
                stored = await self._stored(user_id, telegram_message_id)
                if stored is None:
                    raise
                return self._duplicate(*stored)
        message, answer = stored
        if answer is not None or message.conversation_id is None:
            return self._duplicate(message, answer)
        # Stored but never answered: the process stopped mid-turn. We hold the user's turn lock, so
        # no other process is answering it; its turn runs now, without storing it again.
        return await self._resume(message)

    async def _stored(
        self, user_id: int, telegram_message_id: int | None
    ) -> tuple[TranscriptMessage, TranscriptMessage | None] | None:
        if telegram_message_id is None:
            return None
        async with self.sessions() as session:
            transcript = TranscriptRepository(session)
            stored = await transcript.by_telegram_id(user_id, telegram_message_id)
            if stored is None:
                return None
            return stored, await transcript.reply_to(stored.id)

    def _duplicate(self, stored: TranscriptMessage, answer: TranscriptMessage | None) -> TurnResult:
        logger.info("duplicate delivery", extra={"user_id": stored.user_id, "message_id": stored.id})
        return TurnResult(
            text=answer.content if answer else "",
            conversation_id=stored.conversation_id or 0,
            message_id=stored.id,
            reply_id=answer.id if answer else None,
            new_session=False,
            duplicate=True,
        )

    async def _resume(self, message: TranscriptMessage) -> _Prepared:
        async with self.sessions() as session:
            user = await UserRepository(session).get(message.user_id)
            assert message.conversation_id is not None
            conversation = await ConversationRepository(session).get(message.conversation_id, history=False)
            previous = await session.scalar(
                select(func.max(TranscriptMessage.sent_at)).where(
                    TranscriptMessage.user_id == message.user_id,
                    TranscriptMessage.role == "user",
                    TranscriptMessage.id < message.id,
                )
            )
        if user is None or conversation is None:
            raise UserNotFoundError(f"no user or conversation for message {message.id}")
        logger.info(
            "resuming an unanswered turn",
            extra={"user_id": user.id, "conversation_id": conversation.id, "message_id": message.id},
        )
        return _Prepared(user, conversation, message.content, message.id, False, None, previous)

    async def _store_user_message(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None, kind: str
    ) -> _Prepared:
        async with self.sessions() as session, session.begin():
            user = await UserRepository(session).get(user_id)
            if user is None:
                raise UserNotFoundError(f"no user with id {user_id}")
            conversations = ConversationRepository(session)
            conversation = await conversations.active_for(user_id)
            closed_id: int | None = None
            previous_message_at = user.last_message_at
            if conversation is not None and session_expired(
                conversation.last_message_at, sent_at, self.session_timeout
            ):
                await conversations.close(conversation, conversation.last_message_at)
                closed_id = conversation.id
                self.histories.forget(conversation.id)
                conversation = None
            new_session = conversation is None
            if conversation is None:
                conversation = await conversations.start(user_id, sent_at)
            conversation.last_message_at = max(conversation.last_message_at, sent_at)
            conversation.message_count += 1
            if user.last_message_at is None or sent_at > user.last_message_at:
                user.last_message_at = sent_at
            segment = await DaySegmentRepository(session).open(
                user_id, local_day(sent_at, user.timezone), user.timezone, sent_at
            )
            message = await TranscriptRepository(session).add(
                user_id=user_id,
                conversation_id=conversation.id,
                role="user",
                kind=kind,
                content=text,
                sent_at=sent_at,
                telegram_message_id=telegram_message_id,
                day_segment_id=segment.id,
            )
            DaySegmentRepository.record_message(segment, message.id, sent_at)
        if closed_id is not None:
            logger.info(
                "session closed by new message", extra={"user_id": user_id, "conversation_id": closed_id}
            )
        return _Prepared(user, conversation, text, message.id, new_session, closed_id, previous_message_at)

    async def _refuse(
        self, prepared: _Prepared, sent_at: datetime, receipt: TurnReceipt | None, over: Over
    ) -> TurnResult:
        # Over a daily token cap: the message stays stored and gets BUDGET_REPLY, without a model call.
        logger.info("token budget reached", extra={"user_id": prepared.user.id, "budget": over})
        conversation = prepared.conversation
        stored_history = await self.histories.load(
            self.sessions, conversation.id, conversation.message_count - 1
        )
        new_messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(prepared.text, timestamp=sent_at)]),
            ModelResponse(parts=[TextPart(BUDGET_REPLY)], timestamp=sent_at),
        ]
        counted, none = counting(receipt, over, sent_at), UsageMeter()
        reply_id = await self._persist(
            prepared, stored_history, new_messages, BUDGET_REPLY, None, {}, sent_at, "budget", counted, none
        )
        return TurnResult(
            text=BUDGET_REPLY,
            conversation_id=conversation.id,
            message_id=prepared.message_id,
            reply_id=reply_id,
            new_session=prepared.new_session,
            closed_conversation_id=prepared.closed_id,
        )

    async def _run_and_persist(
        self,
        prepared: _Prepared,
        sent_at: datetime,
        receipt: TurnReceipt | None,
        progress: TurnProgress | None = None,
    ) -> TurnResult:
        conversation = prepared.conversation
        # The count includes this turn's user message, stored a moment ago.
        stored_history = await self.histories.load(
            self.sessions, conversation.id, conversation.message_count - 1
        )
        # Every model call of the turn (compaction, the chat run) counts towards the user's usage.
        meter = UsageMeter()
        with metering(meter):
            return await self._metered_run(prepared, stored_history, sent_at, receipt, meter, progress)

    async def _metered_run(
        self,
        prepared: _Prepared,
        stored_history: StoredHistory,
        sent_at: datetime,
        receipt: TurnReceipt | None,
        meter: UsageMeter,
        progress: TurnProgress | None,
    ) -> TurnResult:
        user, conversation, text = prepared.user, prepared.conversation, prepared.text
        stored = stored_history.messages
        # Tiers, compaction and the budget (history included) in one place; each tier in its own session.
        context = await self.context_builder.build(
            self.sessions,
            user=user,
            conversation=conversation,
            text=text,
            now=sent_at,
            previous_message_at=prepared.previous_message_at,
            history=stored,
        )
        # First message of a session: no history, so the instructions start the run fresh.
        history: list[ModelMessage] | None = context.history
        deps = TurnDeps(
            user_id=user.id,
            conversation_id=conversation.id,
            now=sent_at,
            timezone=user.timezone,
            sessions=self.sessions,
            persona=persona_for(self.settings).chat,
            context=context.text,
            recall=self.recall,
        )
        failed = False
        stored_text = text  # how the transcript shows the message once the model described its files
        try:
            result = await chat_agent.run(
                files.prompt(text, prepared.attachments) if prepared.attachments else text,
                message_history=history,
                deps=deps,
                model=self.model,
                model_settings=chat_model_settings(self.settings),
                event_stream_handler=(
                    event_handler(progress, files.visible)
                    if progress is not None and can_stream(self.model)
                    else None
                ),
            )
            record_run("chat", result.usage)
            answer = result.output.replace("\x00", "")
            new_messages = result.new_messages()
            if prepared.attachments:
                description, answer = files.split_description(answer)
                stored_text = files.remembered(text, description)
                new_messages = files.without_files(new_messages, stored_text)
        except Exception as exc:
            # Whatever the run raised (the model, a tool, a bug), the exchange is stored with an
            # apology, so the message is answered and the next turn's history stays valid. A database
            # that is briefly away is the exception: the inbox retries the whole update instead.
            if is_transient(exc):
                raise
            model_side = isinstance(exc, AgentRunError | TimeoutError)
            extra = {"user_id": user.id, "conversation_id": conversation.id}
            if model_side:
                logger.warning("model call failed", extra=extra, exc_info=exc)
            else:
                logger.exception("agent run failed", extra=extra)
            failed = True
            answer = APOLOGY if model_side else FAULT_APOLOGY
            # A request always followed by its response: the next turn's history stays valid.
            new_messages = [
                ModelRequest(parts=[UserPromptPart(text, timestamp=sent_at)]),
                ModelResponse(parts=[TextPart(answer)], timestamp=sent_at),
            ]
        snapshot: dict[str, object] = {**context.snapshot, "model_failed": failed}
        if stored_text != text:
            prepared = replace(prepared, text=stored_text)
        kind = "apology" if failed else "text"
        reply_id = await self._persist(
            prepared, stored_history, new_messages, answer, context, snapshot, sent_at, kind, receipt, meter
        )
        if self.recall is not None:
            # Full text was indexed in the transactions (triggers / generated columns); embeddings
            # follow in the background, so the reply never waits for the embedder and a failure
            # never reaches it (every search catches up on what is missing first).
            task = asyncio.create_task(self.recall.index_quietly(user.id, now=sent_at))
            self._background.add(task)
            task.add_done_callback(self._background.discard)
        return TurnResult(
            text=answer,
            conversation_id=conversation.id,
            message_id=prepared.message_id,
            reply_id=reply_id,
            new_session=prepared.new_session,
            closed_conversation_id=prepared.closed_id,
            failed=failed,
        )

    async def _persist(
        self,
        prepared: _Prepared,
        stored: StoredHistory,
        new_messages: list[ModelMessage],
        answer: str,
        context: BuiltContext | None,
        snapshot: dict[str, object],
        at: datetime,
        reply_kind: str,
        receipt: TurnReceipt | None,
        meter: UsageMeter,
    ) -> int:
        # The full stored history grows; trimming only shapes what the model is sent.
        async with self.sessions() as session, session.begin():
            conversation = await ConversationRepository(session).get(prepared.conversation.id, history=False)
            if conversation is None:  # deleted by /forget while the model was thinking
                return 0
            conversation.message_count += 1
            updated = stored.extended(new_messages, conversation.message_count)
            conversation.messages = updated.raw
            if prepared.attachments:
                # The description the model gave replaces the placeholder, for search and summaries.
                message = await session.get(TranscriptMessage, prepared.message_id)
                if message is not None:
                    message.content = prepared.text
            segment = await DaySegmentRepository(session).open(
                prepared.user.id, local_day(at, prepared.user.timezone), prepared.user.timezone, at
            )
            reply = await TranscriptRepository(session).add(
                user_id=prepared.user.id,
                conversation_id=conversation.id,
                role="assistant",
                content=answer,
                sent_at=at,
                kind=reply_kind,
                reply_to_id=prepared.message_id,
                day_segment_id=segment.id,
            )
            DaySegmentRepository.record_message(segment, reply.id, at)
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
                    conversation_id=conversation.id,
                    message_id=prepared.message_id,
                    instructions=context.text,
                    snapshot=dict(snapshot),
                    created_at=at,
                )
            await store_usage(session, prepared.user.id, at.astimezone(UTC).date(), meter)
            if receipt is not None:
                await receipt(session, answer)
        self.histories.remember(prepared.conversation.id, updated, user_id=prepared.user.id)
        return reply.id
