"""`TurnService.reply`: the one Telegram-free entry point that answers a user's message."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from pydantic_ai.exceptions import AgentRunError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.agent import TurnDeps, build_chat_model, chat_agent, chat_model_settings
from agent.clock import Clock, ensure_utc, local_day
from agent.context import BuiltContext, ContextBuilder
from agent.locks import UserLocks
from agent.search.recall import Recall
from agent.session_history import SessionHistories, StoredHistory
from agent.sessions import session_expired
from agent.settings import Settings
from agent.tokens import get_counter
from db.memory_repositories import flag_summary_due
from db.models import Conversation, User
from db.repositories import (
    ConversationRepository,
    DaySegmentRepository,
    PromptRepository,
    TranscriptRepository,
    UserRepository,
)

logger = logging.getLogger(__name__)

APOLOGY = (
    "Sorry, I couldn't think straight just now (my language model didn't answer). "
    "Your message is saved; please try again in a moment."
)


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
    message_id: int
    new_session: bool
    closed_id: int | None
    previous_message_at: datetime | None


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
        # Conversation search and memory tools (issue 6); None leaves the tools answering "unavailable".
        self.recall = recall
        self.histories = SessionHistories()
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
    ) -> TurnResult:
        """Answer one message; the message is stored before the model is called and never lost."""
        sent_at = ensure_utc(sent_at)
        async with self.locks.hold(user_id):
            duplicate = await self._find_duplicate(user_id, telegram_message_id)
            if duplicate is not None:
                return duplicate
            try:
                prepared = await self._store_user_message(user_id, text, sent_at, telegram_message_id)
            except IntegrityError:
                # Another process stored the same Telegram message between our check and insert.
                retried = await self._find_duplicate(user_id, telegram_message_id)
                if retried is None:
                    raise
                return retried
            return await self._run_and_persist(prepared, text, sent_at)

    async def _find_duplicate(self, user_id: int, telegram_message_id: int | None) -> TurnResult | None:
        if telegram_message_id is None:
            return None
        async with self.sessions() as session:
            transcript = TranscriptRepository(session)
            stored = await transcript.by_telegram_id(user_id, telegram_message_id)
            if stored is None:
                return None
            answer = await transcript.reply_to(stored.id)
        logger.info("duplicate delivery", extra={"user_id": user_id, "message_id": stored.id})
        return TurnResult(
            text=answer.content if answer else "",
            conversation_id=stored.conversation_id or 0,
            message_id=stored.id,
            reply_id=answer.id if answer else None,
            new_session=False,
            duplicate=True,
        )

    async def _store_user_message(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None
    ) -> _Prepared:
        async with self.sessions() as session, session.begin():
            user = await UserRepository(session).get(user_id)
            if user is None:
                from agent.errors import UserNotFoundError

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
        return _Prepared(user, conversation, message.id, new_session, closed_id, previous_message_at)

    async def _run_and_persist(self, prepared: _Prepared, text: str, sent_at: datetime) -> TurnResult:
        user, conversation = prepared.user, prepared.conversation
        # The count includes this turn's user message, stored a moment ago.
        stored_history = await self.histories.load(
            self.sessions, conversation.id, conversation.message_count - 1
        )
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
            context=context.text,
            recall=self.recall,
        )
        failed = False
        try:
            result = await chat_agent.run(
                text,
                message_history=history,
                deps=deps,
                model=self.model,
                model_settings=chat_model_settings(self.settings),
            )
            answer = result.output
            new_messages = result.new_messages()
        except (AgentRunError, TimeoutError) as exc:
            logger.warning(
                "model call failed",
                extra={"user_id": user.id, "conversation_id": conversation.id, "error": type(exc).__name__},
            )
            failed = True
            answer = APOLOGY
            # A request always followed by its response: the next turn's history stays valid.
            new_messages = [
                ModelRequest(parts=[UserPromptPart(text, timestamp=sent_at)]),
                ModelResponse(parts=[TextPart(APOLOGY)], timestamp=sent_at),
            ]
        snapshot: dict[str, object] = {**context.snapshot, "model_failed": failed}
        reply_id = await self._persist(
            prepared, stored_history, new_messages, answer, context, snapshot, sent_at, failed
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
        context: BuiltContext,
        snapshot: dict[str, object],
        at: datetime,
        failed: bool,
    ) -> int:
        # The full stored history grows; trimming only shapes what the model is sent.
        async with self.sessions() as session, session.begin():
            conversation = await ConversationRepository(session).get(prepared.conversation.id, history=False)
            if conversation is None:  # deleted by /forget while the model was thinking
                return 0
            conversation.message_count += 1
            updated = stored.extended(new_messages, conversation.message_count)
            conversation.messages = updated.raw
            segment = await DaySegmentRepository(session).open(
                prepared.user.id, local_day(at, prepared.user.timezone), prepared.user.timezone, at
            )
            reply = await TranscriptRepository(session).add(
                user_id=prepared.user.id,
                conversation_id=conversation.id,
                role="assistant",
                content=answer,
                sent_at=at,
                kind="apology" if failed else "text",
                reply_to_id=prepared.message_id,
                day_segment_id=segment.id,
            )
            DaySegmentRepository.record_message(segment, reply.id, at)
            # Only a flag: the day-summaries job summarises, never the user's turn (issue 4).
            await flag_summary_due(
                session,
                segment,
                threshold=self.settings.day_summary_message_threshold,
                token_budget=self.settings.day_raw_token_budget,
                count_tokens=self.counter.count,
            )
            await PromptRepository(session).add(
                user_id=prepared.user.id,
                conversation_id=conversation.id,
                message_id=prepared.message_id,
                instructions=context.text,
                snapshot=dict(snapshot),
                created_at=at,
            )
        self.histories.remember(prepared.conversation.id, updated)
        return reply.id
