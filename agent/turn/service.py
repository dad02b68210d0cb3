"""`TurnService`: the one Telegram-free way into every kind of turn.

The service builds what turns share once: the `TurnKit` each turn is handed (the model, the context
builder, the cached histories, the message arrival: agent/turn/kit.py) and the one `TurnFrame`
(agent/turn/frame.py) every turn runs in: serialised with the user's other turns, stored before the
model is called, answered once however often it is delivered, and stored with the caller's
`TurnReceipt` and the usage in one transaction. Its methods are the turns: a private chat's reply,
a group's addressed and heard messages, onboarding, short answers, and finished voice calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.chat import attachments as files
from agent.chat.agent import build_chat_model
from agent.chat.streaming import TurnProgress
from agent.context import ContextBuilder
from agent.core.clock import Clock, ensure_utc
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
from agent.turn.frame import Turn, TurnFrame, clean
from agent.turn.group_turn import GroupTurn, HeardTurn
from agent.turn.kit import Background, TurnKit
from agent.turn.onboarding_turn import OnboardingReply, OnboardingTurn
from agent.turn.serial import TurnQueue
from agent.turn.short_answer import ShortAnswerTurn
from agent.turn.transcript import Speaker, TurnReceipt
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
        # The person's facts: the memory tools and the facts recalled for each message read them.
        self.facts = facts if facts is not None or recall is None else Facts.over(settings, recall)
        self.context_builder = context_builder or ContextBuilder(settings, recall=self.facts)
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
        )
        # Serialisation, repeats, budgets, metering and the receipt: every surface's turn.
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

    async def _run[T, A, R](
        self,
        build: Callable[..., Turn[T, A, R]],
        owner: int,
        sent_at: datetime,
        *,
        receipt: TurnReceipt | None = None,
        held: bool = False,
        **fields: object,
    ) -> R:
        """Build the turn of `owner`'s message sent at `sent_at` over the kit, and run it in the frame.

        `held`: the caller's inbox lease already serialises the conversation's turns (agent/turn/serial.py).
        """
        turn = build(kit=self.kit, key=owner, user_id=owner, at=ensure_utc(sent_at), **fields)
        return await self.frame.run(turn, receipt=receipt, held=held)

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
        """
        return await self._run(
            ChatTurn,
            user_id,
            sent_at,
            receipt=receipt,
            held=held,
            telegram_message_id=telegram_message_id,
            text=clean(text),
            kind=kind,
            attachments=tuple(attachments),
            progress=progress,
        )

    async def group_reply(
        self,
        owner_id: int,
        text: str,
        sent_at: datetime,
        *,
        speaker: Speaker,
        telegram_message_id: int | None = None,
        receipt: TurnReceipt | None = None,
        progress: TurnProgress | None = None,
        kind: str = "text",
        held: bool = False,
        may_change_memory: bool = False,
    ) -> TurnResult:
        """Answer a message addressed to the bot in the group whose memory `owner_id` is;
        `may_change_memory`: the sender administers the group, so the tools may change or remove
        its memory."""
        return await self._run(
            GroupTurn,
            owner_id,
            sent_at,
            receipt=receipt,
            held=held,
            telegram_message_id=telegram_message_id,
            text=clean(text),
            kind=kind,
            attachments=(),
            progress=progress,
            speaker=speaker,
            may_change_memory=may_change_memory,
        )

    async def hear(
        self,
        owner_id: int,
        text: str,
        sent_at: datetime,
        *,
        speaker: Speaker,
        telegram_message_id: int | None = None,
        kind: str = "text",
        held: bool = False,
    ) -> bool:
        """Store a group message the bot only hears; False when it was stored already."""
        return await self._run(
            HeardTurn,
            owner_id,
            sent_at,
            held=held,
            telegram_message_id=telegram_message_id,
            text=clean(text),
            kind=kind,
            speaker=speaker,
        )

    async def onboard(
        self,
        user_id: int,
        text: str,
        sent_at: datetime,
        *,
        telegram_message_id: int | None = None,
        fallback_name: str | None = None,
        receipt: TurnReceipt | None = None,
        held: bool = False,
    ) -> OnboardingReply | None:
        """Answer one message in onboarding; None when the user has completed onboarding already.

        Like `reply`: a message stored and answered before is a repeat; stored but
        unanswered (the process stopped mid-turn), it is answered now without being stored again.
        """
        return await self._run(
            OnboardingTurn,
            user_id,
            sent_at,
            receipt=receipt,
            held=held,
            telegram_message_id=telegram_message_id,
            text=clean(text),
            fallback_name=fallback_name,
        )

    async def skip_onboarding(self, user_id: int, fallback_name: str | None, *, held: bool = False) -> None:
        """Leave onboarding now: keep what was collected, fill the name from the fallback."""
        async with self.frame.serialised(user_id, held=held), self.sessions() as session, session.begin():
            user = await session.get(User, user_id)
            if user is None:
                raise UserNotFoundError(f"no user with id {user_id}")
            user.name = user.name or fallback_name
            user.onboarding_status = "complete"

    async def short_answer(
        self,
        user_id: int,
        *,
        kind: str,
        content: str,
        sent_at: datetime,
        answer: str = "",
        telegram_message_id: int | None = None,
        receipt: TurnReceipt | None = None,
        held: bool = False,
    ) -> bool:
        """Store a message the model does not see with `answer` recorded through `receipt`; False when
        stored already."""
        return await self._run(
            ShortAnswerTurn,
            user_id,
            sent_at,
            receipt=receipt,
            held=held,
            telegram_message_id=telegram_message_id,
            kind=kind,
            content=content,
            reply=answer,
        )

    async def store_call(self, user_id: int, call: FinishedCall, *, may_write: MayWrite) -> StoredCall | None:
        """Store a finished voice call once (by its call id); None when `may_write` finds no user whose
        memory takes the write."""
        return await self._run(CallTurn, user_id, call.ended_at, call=call, may_write=may_write)
