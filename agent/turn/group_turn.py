"""A group chat's turns: a message the bot only hears, and one addressed to it, in the turn frame.

A group is a memory owner of its own (agent/account/groups.py), so both turns run with the group's
owner id: its sessions, history, days, search and facts, never a member's. Every message is stored
once, with its speaker. A heard message joins the group's open conversation (a long enough pause closes
it, as for a person) and gets no model call and no answer. An addressed message is a chat turn
whose user prompt is what was heard since the bot's last answer, one line per speaker, then the
addressed message: that prompt is what the stored history keeps, so the history stays a valid
alternation of requests and responses however many people spoke in between.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from pydantic_ai.settings import ModelSettings
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.chat.agent import chat_model_settings
from agent.turn.arrival import Prepared
from agent.turn.chat_turn import ChatTurn, TurnResult
from agent.turn.daily_tokens import Over
from agent.turn.frame import Done, Stored, Turn
from agent.turn.transcript import Repeat
from db.models import TranscriptMessage

# At most this many heard lines go with an addressed message (the newest); older ones stay searchable.
MAX_HEARD = 40

GROUP_RULE = """

## In a group chat

You are in a group chat with several people. The message you get lists what was said since your
last answer, one line per speaker ("Name: ..."), and last the message addressed to you
("Name (to you): ..."). Answer that person, and name who you answer when several are talking.
Only this group's conversation is known here: nothing from anyone's private chat with you."""


def heard_line(speaker: str | None, content: str, *, to_you: bool = False) -> str:
    """One message as the model reads it in a group: "Ana: ..." or "Bob (to you): ..."."""
    name = speaker or "Someone"
    return f"{name} (to you): {content}" if to_you else f"{name}: {content}"


async def group_prompt(session: AsyncSession, message: TranscriptMessage) -> str:
    """The user prompt of an addressed group message: the lines heard since the last answer, then it."""
    assert message.conversation_id is not None
    in_conversation = TranscriptMessage.conversation_id == message.conversation_id
    last_answer = (
        select(func.coalesce(func.max(TranscriptMessage.id), 0))
        .where(in_conversation, TranscriptMessage.role == "assistant", TranscriptMessage.id < message.id)
        .scalar_subquery()
    )
    rows = (
        await session.execute(
            select(TranscriptMessage.speaker_name, TranscriptMessage.content)
            .where(
                in_conversation,
                TranscriptMessage.role == "user",
                TranscriptMessage.id > last_answer,
                TranscriptMessage.id < message.id,
            )
            .order_by(TranscriptMessage.id.desc())
            .limit(MAX_HEARD)
        )
    ).all()
    lines = [heard_line(name, content) for name, content in reversed(rows)]
    lines.append(heard_line(message.speaker_name, message.content, to_you=True))
    return "\n".join(lines)


@dataclass(kw_only=True)
class GroupTurn(ChatTurn):
    """A group message addressed to the bot, answered by the chat agent with the group's memory (a
    member who is not the group's admin changes nothing of it: `Incoming.may_change_memory`)."""

    def instructions(self) -> str:
        """The persona with the group rule after it."""
        return super().instructions() + GROUP_RULE

    def model_settings(self) -> ModelSettings:
        """The chat model's settings with an hour-long conversation cache: a busy group's addressed
        turns come some ten minutes apart, past a 5-minute entry's life, and each would write the
        group's whole history again."""
        return chat_model_settings(self.kit.settings, conversation_ttl="1h")

    async def resume(self, session: AsyncSession, found: Repeat) -> Prepared | Done[TurnResult]:
        """A message stored but never answered: answered now, with what was heard before it."""
        taken = await super().resume(session, found)
        if isinstance(taken, Done):
            return taken
        return replace(taken, text=await group_prompt(session, found.message))

    async def take(self, session: AsyncSession) -> Prepared:
        """Store the message with its speaker; the prompt is what was heard, then the message."""
        prepared = await self.kit.arrival.store(session, self.message)
        message = await session.get(TranscriptMessage, prepared.message_id)
        assert message is not None
        return replace(prepared, text=await group_prompt(session, message))


@dataclass(kw_only=True)
class HeardTurn(Turn[int, None, bool]):
    """A group message not addressed to the bot: stored with its speaker, no model call, no answer."""

    calls_model: ClassVar[bool] = False
    looks_first: ClassVar[bool] = False

    async def resume(self, session: AsyncSession, found: Repeat) -> Done[bool]:
        """Heard before: nothing to do."""
        return Done(False)

    async def take(self, session: AsyncSession) -> int:
        """Store the message in the group's session."""
        prepared = await self.kit.arrival.store(session, self.message, answered=False)
        return prepared.message_id

    async def answer(self, taken: int, over: Over | None) -> None:
        """No answer."""

    async def store(self, session: AsyncSession, taken: int, answer: None) -> Stored[bool]:
        """Nothing more to write, and no answer to record."""
        return Stored(True, None)

    async def after(self, taken: int, answer: None, result: bool) -> None:
        """Index the heard message for search, as an answered turn's messages are."""
        self.kit.background.index(self.user_id, self.at)
