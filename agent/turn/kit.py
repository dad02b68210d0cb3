"""What every turn is handed: one frozen `TurnKit` of exactly what the turns use, never the service.

`TurnService` (agent/turn/service.py) builds the kit once and hands it to each turn it runs, so a
turn module never imports the service, and a turn is built from the kit and its own message.
"""

from __future__ import annotations

import asyncio
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import datetime

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context import ContextBuilder
from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.core.tokens import TokenCounter
from agent.history.cache import ConversationHistories
from agent.memory.service import Facts
from agent.search.recall import Recall
from agent.turn.arrival import MessageArrival
from agent.turn.transcript import DayText

# How long a finished turn's embeddings wait: past the sending of its answer, and long enough that a
# burst of messages is embedded once.
INDEX_PAUSE_SECONDS = 1.0


@dataclass
class Background:
    """The background work of finished turns (embedding what they stored), awaited by `settle`.

    A person's turns are embedded a moment after their answer, once for the turns of that moment:
    the embedder and its writes then never compete with the answer being sent. `settle` ends the
    pause at once.
    """

    recall: Recall | None
    pause: float = INDEX_PAUSE_SECONDS
    tasks: set[asyncio.Task[object]] = field(default_factory=set)
    # The people with embeddings due, and the time of their latest turn.
    due: dict[int, datetime] = field(default_factory=dict)
    hurry: asyncio.Event = field(default_factory=asyncio.Event)

    def index(self, user_id: int, at: datetime) -> None:
        """Embed what the user's turns stored, in the background."""
        if self.recall is None:
            return
        waiting = user_id in self.due
        self.due[user_id] = max(at, self.due.get(user_id, at))
        if waiting:
            return  # the pass already due takes this turn too
        # Full text was indexed in the transactions (triggers / generated columns); embeddings follow
        # in the background, so the reply never waits for the embedder and a failure never reaches
        # it (every search catches up on what is missing first).
        task = asyncio.create_task(self._index(user_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _index(self, user_id: int) -> None:
        assert self.recall is not None
        try:
            with suppress(TimeoutError):
                await asyncio.wait_for(self.hurry.wait(), self.pause)
        finally:
            at = self.due.pop(user_id)  # cancelled too: the next turn starts a pass again
        await self.recall.index_quietly(user_id, now=at)

    async def settle(self) -> None:
        """Wait for the background work of finished turns."""
        self.hurry.set()
        try:
            while self.tasks:
                await asyncio.gather(*list(self.tasks), return_exceptions=True)
                # Finished tasks leave the set in their done callbacks, which the loop runs later; a
                # gather of tasks that are all done already returns without yielding, so without this
                # the loop never gets to run those callbacks and this spins forever.
                await asyncio.sleep(0)
        finally:
            self.hurry.clear()


@dataclass(frozen=True)
class TurnKit:
    """What the turns read: the database, the settings, the model and the parts of a chat turn."""

    settings: Settings
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    model: Model | str
    context_builder: ContextBuilder
    histories: ConversationHistories
    arrival: MessageArrival
    counter: TokenCounter
    # Conversation search and memory tools; None leaves the tools answering "unavailable".
    recall: Recall | None
    # The person's facts: the memory tools and the facts found for each message read them.
    facts: Facts | None
    background: Background
    # The open days' unsummarised tokens, counted on by each answer (agent/turn/transcript.py).
    day_text: DayText
