"""`TurnService.reply`: the one Telegram-free entry point that answers a user's message.

The service holds what turns share (the model, the context builder, the cached histories, the
turn queue and budgets of the turn frame) and runs each message as a `ChatTurn` (agent/turn/chat_turn.py)
in the turn frame (agent/turn/frame.py): serialised with the user's other turns, stored before the
model is called, answered once however often it is delivered, and stored with the caller's
`TurnReceipt` and the usage in one transaction.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timedelta

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.chat import attachments as files
from agent.chat.agent import build_chat_model
from agent.chat.streaming import TurnProgress
from agent.context import ContextBuilder
from agent.core.clock import Clock, ensure_utc
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.history.cache import SessionHistories
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.chat_turn import ChatTurn, TurnResult
from agent.turn.daily_tokens import TokenBudget
from agent.turn.frame import TurnFrame, clean
from agent.turn.intake import MessageIntake
from agent.turn.serial import TurnQueue
from agent.turn.transcript import TurnReceipt


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
        self.context_builder = context_builder or ContextBuilder(settings, memory=self.facts)
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
        self.frame = TurnFrame(sessions=sessions, queue=self.queue, budget=self.budget)
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
        held: bool = False,
    ) -> TurnResult:
        """Answer one message; the message is stored before the model is called and never lost.

        With `progress`, the answer is streamed to it while the model writes (a preview only).
        With `attachments` (photos, text files), `text` is how the transcript shows the message
        ("[photo] caption"); the model sees the files this turn only (agent/chat/attachments.py).
        `held`: the caller's inbox lease already serialises the conversation's turns (agent/turn/serial.py).
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
        return await self.frame.run(turn, receipt=receipt, held=held)
