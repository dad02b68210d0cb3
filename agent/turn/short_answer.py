"""Short answers: a user's message the model does not see ("[sticker 😀]"), stored with the short
reply the surface sends, as a turn of the turn frame (agent/turn/frame.py) that calls no model.

Serialised with the user's other turns; a Telegram message stored before is not stored or answered
again. The message joins the open conversation when there is one, so the transcript shows what happened,
and starts none. The turn returns the reply for the caller to send, also when it finds the message
stored before (its earlier delivery's reply was never sent, or its sending was cut short).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from sqlalchemy.ext.asyncio import AsyncSession

from agent.turn.conversations import conversation_expired
from agent.turn.daily_tokens import Over
from agent.turn.frame import Done, Stored, Turn
from agent.turn.transcript import Repeat, person_in, write_message
from db.repositories.conversations import ConversationRepository


@dataclass(frozen=True)
class ShortReply:
    """The reply to send ("" when none: the user is gone); `duplicate`: the message was stored before."""

    text: str
    duplicate: bool = False


@dataclass(kw_only=True)
class ShortAnswerTurn(Turn[int, str, ShortReply]):
    """A message answered with a fixed short reply: no model call, one transaction."""

    reply: str
    calls_model: ClassVar[bool] = False
    looks_first: ClassVar[bool] = False

    async def resume(self, session: AsyncSession, found: Repeat) -> Done[ShortReply]:
        """Stored before: nothing to store, the same reply to send."""
        return Done(ShortReply(self.reply, duplicate=True))

    async def take(self, session: AsyncSession) -> int | Done[ShortReply]:
        """Store the message in the open conversation, if any; its id."""
        user = await person_in(session, self.message)
        if user is None:
            return Done(ShortReply(""))
        conversation = await ConversationRepository(session).active_for(self.user_id)
        open_conversation = conversation is not None and not conversation_expired(
            conversation.last_message_at, self.at, self.kit.arrival.conversation_timeout
        )
        row = await write_message(
            session,
            user,
            role="user",
            kind=self.message.kind,
            content=self.message.text,
            sent_at=self.at,
            conversation_id=conversation.id if conversation is not None and open_conversation else None,
            telegram_message_id=self.telegram_message_id,
        )
        return row.id

    async def answer(self, taken: int, over: Over | None) -> str:
        """The fixed reply."""
        return self.reply

    async def store(self, session: AsyncSession, taken: int, answer: str) -> Stored[ShortReply]:
        """Nothing more to write: the caller sends the reply."""
        return Stored(ShortReply(answer), answer)
