"""A chat message's way into a turn: stored in its session, or found stored before and resumed.

A new message closes a conversation that a long enough pause ended (queued for post-processing) and
opens the next, and is stored before the model is called, so it is never lost. A message stored
before but never answered (the process stopped mid-turn) is resumed: its turn runs now for the
stored message. Both run in the turn frame's arrival transaction (agent/turn/frame.py), which also
looks the message up by its Telegram id first and reads the daily token caps.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.chat import attachments as files
from agent.core.clock import local_day
from agent.core.errors import UserNotFoundError
from agent.history.cache import ConversationHistories
from agent.search.language import detect_language, set_language
from agent.turn.conversations import conversation_expired, conversation_timeout_for
from agent.turn.transcript import Incoming, person_in, store_said
from db.models import TOUCHPOINT_KIND, Conversation, DaySegment, TranscriptMessage, User
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
    new_conversation: bool
    closed_id: int | None
    previous_message_at: datetime | None
    attachments: tuple[files.Attachment, ...] = ()
    day_segment_id: int | None = None  # the day the message went into, the answer's too


@dataclass(frozen=True)
class MessageArrival:
    """Takes a chat turn's message in, in the turn frame's transaction (agent/turn/frame.py)."""

    histories: ConversationHistories
    conversation_timeout: timedelta
    # How long a conversation the bot opened by writing first waits for the user's answer.
    reply_window: timedelta | None = None

    async def resume(self, session: AsyncSession, message: TranscriptMessage) -> Prepared:
        """A message stored but never answered (the process stopped mid-turn), ready to answer."""
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
        return Prepared(
            user, conversation, message.content, message.id, False, None, previous, (), message.day_segment_id
        )

    async def store(self, session: AsyncSession, message: Incoming, *, answered: bool = True) -> Prepared:
        """Store a new message in its conversation (closing one a long enough pause ended).

        The person is the caller's copy when it read one (not read again), else read here with the
        conversation in one statement. `answered=False`: a group message the bot only hears; the
        conversation's message count is the version of its stored history, which only answered
        turns grow, so it stays as it is.
        """
        user_id, sent_at, kind = message.owner, message.sent_at, message.kind
        conversations = ConversationRepository(session)
        today: DaySegment | None = None
        if message.person is not None and message.person.id == user_id:
            user: User | None = await person_in(session, message)
            assert user is not None
            day = local_day(sent_at, user.timezone)
            conversation, today = await conversations.active_and_day(user_id, day)
        else:
            user, conversation = await conversations.user_and_active(user_id)
        if user is None:
            raise UserNotFoundError(f"no user with id {user_id}")
        closed_id: int | None = None
        previous_message_at = user.last_message_at
        timeout = (
            conversation_timeout_for(conversation.kind, self.conversation_timeout, self.reply_window)
            if conversation is not None
            else self.conversation_timeout
        )
        if conversation is not None and conversation_expired(conversation.last_message_at, sent_at, timeout):
            await conversations.end_and_queue(conversation, conversation.last_message_at)
            closed_id = conversation.id
            self.histories.forget(conversation.id)
            conversation = None
        new_conversation = conversation is None
        if conversation is None:
            conversation = await conversations.start(user_id, sent_at)
        if conversation.kind == TOUCHPOINT_KIND:
            conversation.kind = "text"  # answered: an ordinary conversation from now on
        conversation.last_message_at = max(conversation.last_message_at, sent_at)
        if answered:
            conversation.message_count += 1
        said = await store_said(session, user, message, conversation_id=conversation.id, day=today)
        if user.language is None and kind == "text":
            # Until the user's language is known, each message may tell it (full text stems by it).
            language = detect_language(message.text)
            if language is not None:
                await set_language(session, user.id, language)
        if closed_id is not None:
            logger.info(
                "conversation closed by new message", extra={"user_id": user_id, "conversation_id": closed_id}
            )
        return Prepared(
            user,
            conversation,
            message.text,
            said.id,
            new_conversation,
            closed_id,
            previous_message_at,
            day_segment_id=said.day_segment_id,
        )
