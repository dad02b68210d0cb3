"""Storing what users send that the model does not answer (stickers, photos, voice, files).

Telegram-free: the handlers describe the message ("[sticker 😀]") and this stores it as a user
row of that kind, in the open session when there is one, so the transcript shows what happened.
The short answer is recorded through the receipt in the same transaction, so a message
stored is a message whose answer will be sent.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.clock import local_day
from agent.service import TurnReceipt
from agent.sessions import session_expired
from db.models import User
from db.repositories import ConversationRepository, DaySegmentRepository, TranscriptRepository


async def store_unanswered(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    *,
    kind: str,
    content: str,
    sent_at: datetime,
    session_timeout: timedelta,
    telegram_message_id: int | None = None,
    answer: str = "",
    receipt: TurnReceipt | None = None,
) -> bool:
    """Store one user message the model will not see; False when it was stored already (a retry)."""
    try:
        async with sessions() as session, session.begin():
            transcript = TranscriptRepository(session)
            if telegram_message_id is not None and await transcript.by_telegram_id(
                user_id, telegram_message_id
            ):
                return False
            user = await session.get(User, user_id)
            if user is None:
                return False
            conversation = await ConversationRepository(session).active_for(user_id)
            conversation_id = None
            if conversation is not None and not session_expired(
                conversation.last_message_at, sent_at, session_timeout
            ):
                conversation_id = conversation.id
            days = DaySegmentRepository(session)
            segment = await days.open(user_id, local_day(sent_at, user.timezone), user.timezone, sent_at)
            row = await transcript.add(
                user_id=user_id,
                conversation_id=conversation_id,
                role="user",
                kind=kind,
                content=content,
                sent_at=sent_at,
                telegram_message_id=telegram_message_id,
                day_segment_id=segment.id,
            )
            DaySegmentRepository.record_message(segment, row.id, sent_at)
            if receipt is not None:
                await receipt(session, answer)
    except IntegrityError:
        # A concurrent retry of the same Telegram message stored it first.
        return False
    return True
