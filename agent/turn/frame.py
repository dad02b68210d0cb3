"""The turn frame: the one skeleton every surface's turn runs in (chat, groups, onboarding, short answers,
voice calls).

A turn, in order:

1. **serialise**: the turns of one key (a user's private chat) run one at a time;
2. **take it in**, in one transaction: a message stored before is found (`Turn.earlier`: by its
   Telegram id, or by the surface's own key such as a call id) and is either what it got the
   first time or, stored but never answered because the process stopped mid-turn, resumed;
   otherwise what arrived is stored (`Turn.take`). A turn whose repeats the unique index of the
   Telegram id refuses stores first and looks only when refused (`Turn.looks_first` False). A turn
   that calls the model reads the daily token caps in that same transaction;
3. **answer** (`Turn.answer`), with every model call metered; over a daily cap the surface answers
   without a model call and the refusal is counted;
4. **persist** (`Turn.store`) in one transaction with, last, the usage (and a refusal's count).

A message the model answers is committed in step 2, before the model is called, so it is never
lost. A turn that calls no model (a short answer, a finished call) has no step 3 and makes steps 2
and 4 one transaction. Should another process store the same message between the look-up and the
write, the unique index refuses the second write and the frame looks again; so it does when the
message's answer was stored meanwhile (one answer per message, another unique index).

The turn returns its result, which carries the answer; the caller delivers it (the Telegram
inbox: bot/delivery/worked_row.py). A caller that did not deliver it, say because its process
stopped after the commit, runs the turn again: the stored message is found by its Telegram id
with the answer it got, which the turn returns again (marked a duplicate) without a model call.

A surface plugs in by subclassing `Turn`: what to take in, what to run for the answer, what to
store. The frame knows whose turn it is by `key` (whose turns are serialised) and `user_id` (whose
daily caps and usage), so a turn keyed by something other than its user fits as it is.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import ClassVar

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core import observability
from agent.core.activity import Activity
from agent.core.usage import UsageMeter, metering, store_usage
from agent.turn.daily_tokens import DailyCaps, Over, count_refusal
from agent.turn.kit import TurnKit
from agent.turn.serial import TurnQueue
from agent.turn.transcript import Incoming, Repeat, find_repeat

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Done[R]:
    """A turn with nothing (more) to answer: a repeat, or nothing to do; its result."""

    result: R


@dataclass(frozen=True)
class Stored[R]:
    """What `Turn.store` wrote: the turn's result and the answer it stored.

    `answer` None: no answer (the user was forgotten while the model was thinking, or the surface
    answers nothing, as a finished call), so no usage is stored.
    """

    result: R
    answer: str | None


@dataclass(kw_only=True)
class Turn[T, A, R]:
    """One turn of a surface, as the frame runs it; a surface overrides the steps that are its own.

    `T` is what the surface took in (the stored message it answers), `A` its answer before it is
    stored, `R` what the turn returns to its caller. Every turn is built from the kit and the
    `Incoming` message; its owner is whose turns are serialised and whose daily caps and usage count.
    """

    kit: TurnKit
    message: Incoming
    # False: no model call, so no caps to read and steps 2 and 4 share one transaction.
    calls_model: ClassVar[bool] = True
    # False: the message is stored at once, and a repeat is what the unique index of its Telegram id
    # refuses (then looked up): no look-up on the way of every first delivery.
    looks_first: ClassVar[bool] = True
    # Set by the frame once the answer is ready: ms since the turn started (its snapshot keeps it).
    answered_ms: float | None = field(default=None, init=False)

    @property
    def key(self) -> int:
        """Whose turns are serialised: the owner's."""
        return self.message.owner

    @property
    def user_id(self) -> int:
        """Whose daily caps and usage: the owner's."""
        return self.message.owner

    @property
    def at(self) -> datetime:
        """The message's own time (the caps' day, the usage's day)."""
        return self.message.sent_at

    @property
    def telegram_message_id(self) -> int | None:
        """The message's Telegram id, by which a repeated delivery is found."""
        return self.message.telegram_message_id

    async def earlier(self, session: AsyncSession) -> T | Done[R] | None:
        """A message stored before: its turn to resume, what it got the first time, or None."""
        found = await find_repeat(session, self.user_id, self.telegram_message_id)
        return None if found is None else await self.resume(session, found)

    async def resume(self, session: AsyncSession, found: Repeat) -> T | Done[R]:
        """A message stored before: answer it now (stored, never answered) or return `Done`."""
        raise NotImplementedError

    async def take(self, session: AsyncSession) -> T | Done[R]:
        """Store what arrived, in the frame's transaction (Done: nothing to answer)."""
        raise NotImplementedError

    async def answer(self, taken: T, over: Over | None) -> A:
        """The answer; with `over` (a daily token cap reached) one that calls no model."""
        raise NotImplementedError

    async def store(self, session: AsyncSession, taken: T, answer: A) -> Stored[R]:
        """Write the answer in the frame's transaction (the usage follows)."""
        raise NotImplementedError

    async def after(self, taken: T, answer: A, result: R) -> None:
        """Work after the commit (caches, background indexing); nothing by default."""


@dataclass(frozen=True)
class _Taken[T]:
    taken: T
    over: Over | None


@dataclass(frozen=True)
class _Finished[R](Done[R]):
    """A turn that calls no model, stored and done in its arrival's transaction."""

    outcome: str


class TurnFrame:
    """Runs turns: one key's at a time, different keys' side by side."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        queue: TurnQueue,
        caps: DailyCaps | None = None,
        activity: Activity | None = None,
    ) -> None:
        self.sessions = sessions
        self.queue = queue
        # Daily token caps (agent/turn/daily_tokens.py), read before each turn's model call.
        self.caps = caps or DailyCaps()
        # Every turn counts as busy while it runs: the start-up work waits for a pause between turns.
        self.activity = activity or Activity()

    @asynccontextmanager
    async def serialised(self, key: int) -> AsyncIterator[None]:
        """Run the body as the key's only turn in this process (agent/turn/serial.py)."""
        async with self.queue.serial(key):
            yield

    async def run[T, A, R](self, turn: Turn[T, A, R]) -> R:
        """Run one turn through every step of the frame; returns what the surface stored.

        Each step is a span of the turn's trace, and the turn is counted in the metrics
        (agent/core/observability).
        """
        started = time.perf_counter()
        surface = type(turn).__name__.removesuffix("Turn").lower() or "turn"
        outcome = "failed"
        with (
            self.activity.busy(),
            observability.span(
                "turn", {"nikita.turn.surface": surface, "nikita.user.id": turn.user_id}
            ) as traced,
        ):
            try:
                result, outcome = await self._run(turn, started)
            finally:
                observability.turn_done(surface, outcome, time.perf_counter() - started)
                traced.set_attribute("nikita.turn.outcome", outcome)
            if isinstance(conversation_id := getattr(result, "conversation_id", None), int):
                traced.set_attribute("nikita.conversation.id", conversation_id)
        return result

    async def _run[T, A, R](self, turn: Turn[T, A, R], started: float) -> tuple[R, str]:
        async with AsyncExitStack() as serial:
            with observability.span("turn serialise"):
                await serial.enter_async_context(self.serialised(turn.key))
            with observability.span("turn take"):
                try:
                    taken = await self._take(turn)
                except IntegrityError as exc:
                    # Another process stored the same message between our look-up and our write.
                    taken = await self._take(turn, refused=exc)
            if isinstance(taken, _Finished):
                return taken.result, taken.outcome
            if isinstance(taken, Done):
                return taken.result, "repeated"
            if taken.over is not None:
                logger.info("token budget reached", extra={"user_id": turn.user_id, "budget": taken.over})
                observability.refused(observability.CAP_LIMITS[taken.over])
            # Every model call of the turn (compaction, the run itself) counts towards the user's usage.
            with observability.span("turn answer"), metering() as meter:
                answer = await turn.answer(taken.taken, taken.over)
            turn.answered_ms = round((time.perf_counter() - started) * 1000, 2)
            with observability.span("turn persist"):
                try:
                    async with self.sessions() as session, session.begin():
                        stored = await self._persist(session, turn, taken.taken, answer, meter, taken.over)
                except IntegrityError as exc:
                    # Another worker answered the message meanwhile (its update's lease ran out
                    # under this one): that answer stands, given back as a repeat.
                    again = await self._take(turn, refused=exc)
                    if isinstance(again, Done):
                        return again.result, "repeated"
                    raise
            await turn.after(taken.taken, answer, stored.result)
            failed = getattr(stored.result, "failed", False) is True
            return stored.result, "refused" if taken.over else "failed" if failed else "answered"

    async def _take[T, A, R](
        self, turn: Turn[T, A, R], *, refused: IntegrityError | None = None
    ) -> _Taken[T] | Done[R]:
        async with self.sessions() as session, session.begin():
            found = await turn.earlier(session) if turn.looks_first or refused is not None else None
            if found is None and refused is not None:
                raise refused  # not a repeat: some other write was refused
            taken = found if found is not None else await turn.take(session)
            if isinstance(taken, Done):
                return taken
            if turn.calls_model:
                # In the arrival's transaction: one statement, whatever the number of users.
                with observability.span("turn budgets"):
                    return _Taken(taken, await self.caps.check(session, turn.user_id, turn.at))
            answer = await turn.answer(taken, None)
            stored = await self._persist(session, turn, taken, answer, UsageMeter())
        await turn.after(taken, answer, stored.result)
        return _Finished(stored.result, "answered" if stored.answer is not None else "stored")

    @staticmethod
    async def _persist[T, A, R](
        session: AsyncSession,
        turn: Turn[T, A, R],
        taken: T,
        answer: A,
        meter: UsageMeter,
        over: Over | None = None,
    ) -> Stored[R]:
        stored = await turn.store(session, taken, answer)
        if stored.answer is not None:
            if over is not None:  # a refusal, counted with its stored answer
                await count_refusal(session, over, turn.at)
            # Last: it locks the day's token counter until the commit (db/ddl/usage.py).
            await store_usage(session, turn.user_id, turn.at.astimezone(UTC).date(), meter)
        return stored
