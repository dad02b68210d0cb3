"""A message's way into a turn: stored in its session, or found stored before and resumed.

A message already stored under its Telegram id is never stored again: with its answer stored it is
a repeated delivery (`Delivered`); without one (the process stopped mid-turn) its turn runs now for
the stored message. A new message closes a session that a long enough pause ended (queued for
post-processing) and opens the next, and is stored before the model is called, so it is never lost.

Taking a message in is one transaction: the look-up by Telegram id, the writes, and the daily token
budgets' check (agent/turn/daily_tokens.py), which reads what is metered as the message is stored.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.chat import attachments as files
from agent.core.errors import UserNotFoundError
from agent.history.cache import SessionHistories
from agent.search.language import detect_language, set_language
from agent.turn.daily_tokens import Over, TokenBudget
from agent.turn.sessions import session_expired, session_timeout_for
from agent.turn.transcript import Delivered, delivered, write_message
from db.models import PROACTIVE, Conversation, TranscriptMessage, User
from db.repositories.conversations import ConversationRepository
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Prepared:
    """A stored user message about to be answered, in its session."""

    user: User
    conversation: Conversation
    text: str
    message_id: int
    new_session: bool
    closed_id: int | None
    previous_message_at: datetime | None
    attachments: tuple[files.Attachment, ...] = ()
    # The daily token cap the user's day has reached as the message was taken in, if any.
    over: Over | None = None


@dataclass(frozen=True)
class MessageIntake:
    """Takes messages in for the turn service (which runs `take` as the conversation's only turn)."""

    sessions: async_sessionmaker[AsyncSession]
    histories: SessionHistories
    session_timeout: timedelta
    # How long a session the bot opened by writing first waits for the user's answer.
    reply_window: timedelta | None = None
    budget: TokenBudget = field(default_factory=TokenBudget)

    async def take(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None, kind: str
    ) -> Prepared | Delivered:
        """The message ready to answer, or what was delivered before when it needs no new answer."""
        try:
            taken = await self._store(user_id, text, sent_at, telegram_message_id, kind)
        except IntegrityError:
            # Another process stored the same Telegram message between our look-up and insert.
            stored = await self._delivered(user_id, telegram_message_id)
            if stored is None:
                raise
            return stored
        if isinstance(taken, Prepared) or taken.answer is not None or taken.message.conversation_id is None:
            return taken
        # Stored but never answered: the process stopped mid-turn. The caller runs the conversation's
        # only turn (the inbox lease of the row), so nobody else is answering it; it runs now,
        # without storing it again.
        return await self._resume(taken.message, sent_at)

    async def _delivered(self, user_id: int, telegram_message_id: int | None) -> Delivered | None:
        async with self.sessions() as session:
            return await delivered(session, user_id, telegram_message_id)

    async def _resume(self, message: TranscriptMessage, sent_at: datetime) -> Prepared:
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
            over = await self.budget.check(session, message.user_id, sent_at)
        if user is None or conversation is None:
            raise UserNotFoundError(f"no user or conversation for message {message.id}")
        logger.info(
            "resuming an unanswered turn",
            extra={"user_id": user.id, "conversation_id": conversation.id, "message_id": message.id},
        )
        return Prepared(user, conversation, message.content, message.id, False, None, previous, over=over)

    async def _store(
        self, user_id: int, text: str, sent_at: datetime, telegram_message_id: int | None, kind: str
    ) -> Prepared | Delivered:
        async with self.sessions() as session, session.begin():
            found = await delivered(session, user_id, telegram_message_id)
            if found is not None:
                return found
            conversations = ConversationRepository(session)
            user, conversation = await conversations.user_and_active(user_id)
            if user is None:
                raise UserNotFoundError(f"no user with id {user_id}")
            closed_id: int | None = None
            previous_message_at = user.last_message_at
            timeout = (
                session_timeout_for(conversation.kind, self.session_timeout, self.reply_window)
                if conversation is not None
                else self.session_timeout
            )
            if conversation is not None and session_expired(conversation.last_message_at, sent_at, timeout):
                await conversations.end_and_queue(conversation, conversation.last_message_at)
                closed_id = conversation.id
                self.histories.forget(conversation.id)
                conversation = None
            new_session = conversation is None
            if conversation is None:
                conversation = await conversations.start(user_id, sent_at)
            if conversation.kind == PROACTIVE:
                conversation.kind = "text"  # answered: an ordinary conversation from now on
            conversation.last_message_at = max(conversation.last_message_at, sent_at)
            conversation.message_count += 1
            if user.last_message_at is None or sent_at > user.last_message_at:
                user.last_message_at = sent_at
            message = await write_message(
                session,
                user,
                role="user",
                kind=kind,
                content=text,
                sent_at=sent_at,
                conversation_id=conversation.id,
                telegram_message_id=telegram_message_id,
            )
            if user.language is None and kind == "text":
                # Until the user's language is known, each message may tell it (full text stems by it).
                language = detect_language(text)
                if language is not None:
                    await set_language(session, user.id, language)
            over = await self.budget.check(session, user_id, sent_at)
        if closed_id is not None:
            logger.info(
                "session closed by new message", extra={"user_id": user_id, "conversation_id": closed_id}
            )
        return Prepared(
            user, conversation, text, message.id, new_session, closed_id, previous_message_at, over=over
        )
