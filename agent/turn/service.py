"""`TurnService`: the one Telegram-free way into every kind of turn.

The service builds what turns share once: the `TurnKit` each turn is handed (the model, the context
builder, the cached histories, the message arrival: agent/turn/kit.py) and the one `TurnFrame`
(agent/turn/frame.py) every turn runs in: serialised with the user's other turns, stored before the
model is called, answered once however often it is delivered (a repeat gets its stored answer
back), and stored with the usage in one transaction. Its methods are the turns: a private chat's
reply, a group's addressed and heard messages, onboarding, short answers, and finished voice calls;
each takes one `Incoming` (agent/turn/transcript.py: whose memory, the person as read, the message,
when, what it may write) and builds its turn from the kit and that message, and returns the
answer for the caller to send.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.chat import attachments as files
from agent.chat.agent import build_chat_model
from agent.chat.streaming import TurnProgress
from agent.context import ContextBuilder
from agent.core.clock import Clock
from agent.core.errors import UserNotFoundError
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.history.cache import ConversationHistories
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.arrival import MessageArrival
from agent.turn.call_turn import CallTurn, FinishedCall, MayWrite, StoredCall
from agent.turn.chat_turn import ChatTurn, TurnResult
from agent.turn.daily_tokens import DailyCaps
from agent.turn.frame import TurnFrame
from agent.turn.group_turn import GroupTurn, HeardTurn
from agent.turn.kit import Background, TurnKit
from agent.turn.onboarding_turn import OnboardingReply, OnboardingTurn
from agent.turn.serial import TurnQueue
from agent.turn.short_answer import ShortAnswerTurn, ShortReply
from agent.turn.transcript import DayText, Incoming
from db.models import User


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
        facts: Facts | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        self.clock = clock or Clock()
        # The conversation's turns one at a time, for the surfaces without an inbox row.
        self.queue = TurnQueue()
        # The person's facts: the memory tools and the facts found for each message read them.
        self.facts = facts if facts is not None or recall is None else Facts.over(settings, recall)
        self.context_builder = context_builder or ContextBuilder(settings, facts=self.facts)
        self.recall = recall
        self.counter = get_counter()
        # Daily token caps, checked before each turn's model call (agent/turn/daily_tokens.py).
        self.caps = DailyCaps.from_settings(settings)
        self.histories = ConversationHistories(
            max_conversations=settings.history_cache_conversations, max_bytes=settings.history_cache_max_bytes
        )
        reply_window = timedelta(hours=settings.touchpoint_reply_window_hours)
        self.kit = TurnKit(
            settings=settings,
            sessions=sessions,
            clock=self.clock,
            model=model if model is not None else build_chat_model(settings),
            context_builder=self.context_builder,
            histories=self.histories,
            arrival=MessageArrival(self.histories, self.conversation_timeout, reply_window),
            counter=self.counter,
            recall=recall,
            facts=self.facts,
            background=Background(recall),
            day_text=DayText(self.counter.count),
        )
        # Serialisation, repeats, budgets and metering: every surface's turn.
        self.frame = TurnFrame(sessions=sessions, queue=self.queue, caps=self.caps)

    @property
    def model(self) -> Model | str:
        """The chat model the turns run."""
        return self.kit.model

    @model.setter
    def model(self, model: Model | str) -> None:
        self.kit = replace(self.kit, model=model)

    async def settle(self) -> None:
        """Wait for the background work of finished turns (indexing)."""
        await self.kit.background.settle()

    async def close(self) -> None:
        """Finish background work and release what the service holds beyond the shared engine."""
        await self.settle()

    @property
    def conversation_timeout(self) -> timedelta:
        """How long a pause ends a conversation."""
        return timedelta(minutes=self.settings.conversation_timeout_minutes)

    async def reply(
        self,
        message: Incoming,
        *,
        progress: TurnProgress | None = None,
        attachments: Sequence[files.Attachment] = (),
    ) -> TurnResult:
        """Answer one message; the message is stored before the model is called and never lost.

        With `progress`, the answer is streamed to it while the model writes (a preview only).
        With `attachments` (photos, text files), the message's text is how the transcript shows it
        ("[photo] caption"); the model sees the files this turn only (agent/chat/attachments.py).
        """
        turn = ChatTurn(kit=self.kit, message=message, progress=progress, attachments=tuple(attachments))
        return await self.frame.run(turn)

    async def group_reply(self, message: Incoming, *, progress: TurnProgress | None = None) -> TurnResult:
        """Answer a message addressed to the bot in the group whose memory `message.owner` is, with
        what was heard since the bot's last answer."""
        return await self.frame.run(GroupTurn(kit=self.kit, message=message, progress=progress))

    async def hear(self, message: Incoming) -> bool:
        """Store a group message the bot only hears; False when it was stored already."""
        return await self.frame.run(HeardTurn(kit=self.kit, message=message))

    async def onboard(self, message: Incoming, *, fallback_name: str | None = None) -> OnboardingReply | None:
        """Answer one message in onboarding; None when the user has completed onboarding already.

        Like `reply`: a message stored and answered before is a repeat; stored but
        unanswered (the process stopped mid-turn), it is answered now without being stored again.
        """
        turn = OnboardingTurn(kit=self.kit, message=message, fallback_name=fallback_name)
        return await self.frame.run(turn)

    async def skip_onboarding(self, user_id: int, fallback_name: str | None) -> None:
        """Leave onboarding now: keep what was collected, fill the name from the fallback."""
        async with self.frame.serialised(user_id), self.sessions() as session, session.begin():
            user = await session.get(User, user_id)
            if user is None:
                raise UserNotFoundError(f"no user with id {user_id}")
            user.name = user.name or fallback_name
            user.onboarding_status = "complete"

    async def short_answer(self, message: Incoming, *, answer: str = "") -> ShortReply:
        """Store a message the model does not see (once) and return `answer` as the reply to send."""
        return await self.frame.run(ShortAnswerTurn(kit=self.kit, message=message, reply=answer))

    async def store_call(self, user_id: int, call: FinishedCall, *, may_write: MayWrite) -> StoredCall | None:
        """Store a finished voice call once (by its call id); None when `may_write` finds no user whose
        memory takes the write."""
        message = Incoming(owner=user_id, text="", sent_at=call.ended_at, kind="voice")
        return await self.frame.run(CallTurn(kit=self.kit, message=message, call=call, may_write=may_write))
