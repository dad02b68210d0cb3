"""The `touchpoints` job: find the due touchpoints, lease them, compose each follow-up and check-in
once, send it durably. A reminder skips the rules and the model (jobs/reminders.py) and takes the
same record-then-send path.

1. Lease: one statement on the `(status, due_at)` index (db/repositories/touchpoints.py); nothing
   due, no model call.
2. Rules (agent/touchpoints/rules.py): cancel or postpone before any model call.
3. Compose: one model call with the user's context tiers (agent/touchpoints/compose.py); a decline
   sends nothing.
4. Record: the text, its transcript row (an assistant turn, kind `TOUCHPOINT_KIND`) and the conversation it
   opens are committed together, under the user's row lock, with the rules read again; from then on
   the row is `sending` and a worker that dies is resumed by the next one (send, no new model call).
5. Send through the bot's messenger, chunk by chunk, each chunk counted on the row, the lease renewed
   before each one; a 403 marks the user unreachable.
"""

from __future__ import annotations

import asyncio
import logging
import time as clocks
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession

from agent.context.builder import ContextBuilder
from agent.core import observability
from agent.core.clock import local_label
from agent.core.errors import LeaseLostError, RecipientBlockedError, SendFailedError
from agent.core.usage import metering, store_usage_apart
from agent.touchpoints.check_ins import plan_check_ins
from agent.touchpoints.compose import Occasion, compose
from agent.touchpoints.messenger import chat_of
from agent.touchpoints.rules import WEEK, Cancel, Postpone, Subject, decide
from agent.turn.daily_tokens import DailyCaps
from db.models import TOUCHPOINT_KIND, Touchpoint, User
from db.repositories.touchpoints import REMINDER, TouchpointRepository
from db.work import Retry
from jobs.context import JobContext
from jobs.reminders import Closed, record_occurrence, write_first

logger = logging.getLogger(__name__)

# Eight attempts, five minutes apart (the work queue's backoff with its base at its cap).
RETRY = Retry(max_attempts=8, base_seconds=300.0, max_seconds=300.0)
# Touchpoints composed at once (model calls in flight); sends are paced separately.
CONCURRENCY = 8


class Pace:
    """At most `per_second` sends a second across the run (Telegram's broadcast limit is ~30/s)."""

    def __init__(self, per_second: float) -> None:
        self.interval = 1.0 / per_second if per_second > 0 else 0.0
        self.next_at = 0.0
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        """Sleep until this send's slot."""
        async with self.lock:
            now = clocks.monotonic()
            delay = self.next_at - now
            self.next_at = max(now, self.next_at) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


async def deliver_due(ctx: JobContext, *, limit: int | None = None) -> dict[str, Any]:
    """Lease the due touchpoints and work each one; counts by outcome."""
    if ctx.messenger is None:
        return {"due": 0, "no_sender": 1}
    now = ctx.clock.now()
    lease = timedelta(seconds=ctx.settings.touchpoint_lease_seconds)
    check_ins = await plan_check_ins(ctx.sessions, ctx.settings, now)
    async with ctx.sessions() as session, session.begin():
        ids = await TouchpointRepository(session).lease_due(
            holder=ctx.worker_id, now=now, lease=lease, limit=limit or ctx.settings.touchpoint_batch_limit
        )
    counts: Counter[str] = Counter(due=len(ids))
    if check_ins:
        counts["check_ins_planned"] = check_ins
    if not ids:
        return dict(counts)
    worker = _Worker(ctx, Pace(ctx.settings.touchpoint_send_per_second))
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(touchpoint_id: int) -> None:
        async with gate:
            counts[await worker.work(touchpoint_id)] += 1

    await asyncio.gather(*(one(i) for i in ids))
    return dict(counts)


def _quiet(task: asyncio.Task[None]) -> None:
    """A lease keeper's end: cancelled, or the lease was lost or the renewal failed (logged)."""
    if not task.cancelled() and (exc := task.exception()) is not None and not isinstance(exc, LeaseLostError):
        logger.warning("touchpoint lease not renewed", extra={"error": repr(exc)})


class _Worker:
    def __init__(self, ctx: JobContext, pace: Pace) -> None:
        self.ctx = ctx
        self.pace = pace
        self.holder = ctx.worker_id
        self.lease = timedelta(seconds=ctx.settings.touchpoint_lease_seconds)
        self.builder = ContextBuilder(ctx.settings, summary_model=ctx.summary_model)
        self.caps = DailyCaps.from_settings(ctx.settings)

    async def work(self, touchpoint_id: int) -> str:
        # A trace of its own, named and linked once the row is read.
        attributes: observability.Attributes = {
            "nikita.job": "touchpoints",
            "nikita.touchpoint.id": touchpoint_id,
        }
        with observability.root_span("job touchpoint", attributes) as traced:
            outcome = await self._work_logged(touchpoint_id)
            traced.set_attribute("nikita.touchpoint.outcome", outcome)
            return outcome

    async def _work_logged(self, touchpoint_id: int) -> str:
        try:
            return await self._work(touchpoint_id)
        except LeaseLostError:
            return "lease_lost"
        except (SQLAlchemyError, OSError, TimeoutError) as exc:
            logger.warning("touchpoint failed", extra={"touchpoint_id": touchpoint_id, "error": repr(exc)})
            await self._retry_later(touchpoint_id, repr(exc))
            return "retry"

    async def _work(self, touchpoint_id: int) -> str:
        now = self.ctx.clock.now()
        async with self.ctx.sessions() as session:
            row = await TouchpointRepository(session).held(touchpoint_id, self.holder)
            if row is None:
                return "lease_lost"
            name = "job reminder" if row.kind == REMINDER else "job touchpoint"
            observability.annotate(
                {"nikita.user.id": row.user_id, "nikita.touchpoint.kind": row.kind}, name=name
            )
            # A follow-up links to its conversation's turns, a reminder to the turn that set it, a
            # check-in to the person's newest turns.
            await observability.link_turns(
                self.ctx.sessions,
                user_id=row.user_id,
                conversation_id=row.conversation_id,
                reminder_id=row.reminder_id,
            )
            if row.status == "sending":
                return await self._send(row.id, row.user_id, row.text or "", row.chunks_sent, row.reminder_id)
            if row.kind == REMINDER:
                user = None
            elif (user := await session.get(User, row.user_id)) is None:
                return "lease_lost"
            else:
                subject = await _subject(session, row, user, now)
                decision = decide(subject, now, self.ctx.settings)
                reason, timezone, chat_id = row.reason, user.timezone, user.telegram_id
                attempts = row.attempts
        if user is None:
            return await self._remind(touchpoint_id)
        if isinstance(decision, Cancel):
            await self._close(touchpoint_id, "cancelled", decision.outcome)
            return f"cancelled_{decision.outcome}"
        if isinstance(decision, Postpone):
            await self._postpone(touchpoint_id, decision.until)
            return f"postponed_{decision.why}"
        if chat_id is None:
            await self._close(touchpoint_id, "cancelled", "no_chat")
            return "cancelled_no_chat"
        if RETRY.spent(attempts):
            await self._close(touchpoint_id, "cancelled", "failed")
            return "cancelled_failed"
        if await self.caps.over(self.ctx.sessions, user.id, now) is not None:
            # USER_DAILY_TOKENS / DAILY_TOKENS reached: the touchpoint waits for the next UTC day.
            tomorrow = datetime.combine(now.astimezone(UTC).date() + timedelta(days=1), time(), tzinfo=UTC)
            await self._postpone(touchpoint_id, tomorrow)
            return "postponed_budget"
        with metering() as meter, self._kept(touchpoint_id):
            try:
                context = await self.builder.build(
                    self.ctx.sessions,
                    user=user,
                    conversation=None,
                    text=reason,
                    now=now,
                    previous_message_at=user.last_message_at,
                )
                occasion = Occasion(reason, local_label(now, timezone), context.text)
                model = self.ctx.chat_model if self.ctx.chat_model is not None else self.ctx.summary_model
                composition = await compose(model, self.ctx.settings, occasion)
            except Exception as exc:  # the model's failures are many (HTTP, timeouts, bad output)
                logger.warning(
                    "touchpoint not composed",
                    extra={"touchpoint_id": touchpoint_id, "error": repr(exc)},
                    exc_info=exc,
                )
                await self._retry_later(touchpoint_id, repr(exc))
                return "retry"
            finally:
                await store_usage_apart(self.ctx.sessions, user.id, now.astimezone(UTC).date(), meter)
        if not composition.send:
            await self._close(touchpoint_id, "declined", "declined")
            return "declined"
        recorded = await self._record(touchpoint_id, composition.text)
        if isinstance(recorded, Cancel):
            return f"cancelled_{recorded.outcome}"
        if isinstance(recorded, Postpone):
            return f"postponed_{recorded.why}"
        return await self._send(touchpoint_id, user.id, composition.text, 0)

    async def _remind(self, touchpoint_id: int) -> str:
        """A reminder's occurrence: recorded with its transcript row and the next one planned, in one
        transaction under the user's row lock (jobs/reminders.py), then sent with its buttons."""
        now = self.ctx.clock.now()
        async with self.ctx.sessions() as session, session.begin():
            repo = TouchpointRepository(session)
            row, user = await _hold(repo, touchpoint_id, self.holder)
            outcome = await record_occurrence(session, row, user, now=now, settings=self.ctx.settings)
            if isinstance(outcome, Closed):
                await repo.close(
                    touchpoint_id, self.holder, status="cancelled", outcome=outcome.outcome, now=now
                )
                return f"cancelled_{outcome.outcome}"
            if not await repo.record(
                touchpoint_id,
                self.holder,
                text=outcome.text,
                transcript_message_id=outcome.transcript_message_id,
                now=now,
            ):
                raise LeaseLostError
            user_id, reminder_id = user.id, row.reminder_id
        return await self._send(touchpoint_id, user_id, outcome.text, 0, reminder_id)

    async def _record(self, touchpoint_id: int, text: str) -> Cancel | Postpone | None:
        """Store the message as the assistant's turn of a touchpoint's kind, in a conversation it opens; the
        rules are read again under the user's row lock, so two instances never both send to one user."""
        now = self.ctx.clock.now()
        async with self.ctx.sessions() as session, session.begin():
            repo = TouchpointRepository(session)
            row, user = await _hold(repo, touchpoint_id, self.holder)
            decision = decide(await _subject(session, row, user, now), now, self.ctx.settings)
            if isinstance(decision, Cancel | Postpone):
                if isinstance(decision, Cancel):
                    await repo.close(
                        touchpoint_id, self.holder, status="cancelled", outcome=decision.outcome, now=now
                    )
                else:
                    await repo.postpone(touchpoint_id, self.holder, decision.until)
                return decision
            persona = self.ctx.settings.persona_name
            message_id = await write_first(
                session, user, row.reason, text, TOUCHPOINT_KIND, now=now, persona=persona
            )
            if not await repo.record(
                touchpoint_id, self.holder, text=text, transcript_message_id=message_id, now=now
            ):
                raise LeaseLostError
        return None

    async def _send(
        self, touchpoint_id: int, user_id: int, text: str, start: int, reminder_id: int | None = None
    ) -> str:
        assert self.ctx.messenger is not None
        async with self.ctx.sessions() as session:
            person = await session.get(User, user_id)
            chat_id = chat_of(person) if person is not None else None
        if chat_id is None:
            await self._close(touchpoint_id, "undeliverable", "no_chat")
            return "undeliverable"

        async def on_sent(sent: int, total: int) -> None:
            now = self.ctx.clock.now()
            async with self.ctx.sessions() as session, session.begin():
                repo = TouchpointRepository(session)
                done = (
                    await repo.mark_sent(touchpoint_id, self.holder, sent=sent, now=now)
                    if sent >= total
                    else await repo.chunk_sent(touchpoint_id, self.holder, sent=sent)
                )
            if not done:
                raise LeaseLostError

        try:
            await self._renew(touchpoint_id)
            await self.pace.wait()
            await self.ctx.messenger.send(
                chat_id, text, start=start, on_sent=on_sent, reminder_id=reminder_id
            )
        except RecipientBlockedError:
            await self._unreachable(touchpoint_id, user_id)
            return "undeliverable"
        except SendFailedError as exc:
            await self._retry_later(touchpoint_id, repr(exc))
            return "retry"
        return "sent"

    @contextmanager
    def _kept(self, touchpoint_id: int) -> Iterator[None]:
        """Keep the lease while a slow step runs (composing: the context and a model call), renewed
        every third of its length, so another worker never takes the row over and composes it again.
        A renewal that finds the lease lost stops renewing; recording the text then finds it lost."""

        async def renew() -> None:
            while True:
                await self.ctx.sleep(self.lease.total_seconds() / 3)
                await self._renew(touchpoint_id)

        keeper = asyncio.create_task(renew())
        keeper.add_done_callback(_quiet)
        try:
            yield
        finally:
            keeper.cancel()

    async def _renew(self, touchpoint_id: int) -> None:
        until = self.ctx.clock.now() + self.lease
        async with self.ctx.sessions() as session, session.begin():
            renewed = await TouchpointRepository(session).renew(touchpoint_id, self.holder, until)
        if not renewed:
            raise LeaseLostError

    async def _close(self, touchpoint_id: int, status: str, outcome: str | None) -> None:
        async with self.ctx.sessions() as session, session.begin():
            repo = TouchpointRepository(session)
            await repo.close(
                touchpoint_id, self.holder, status=status, outcome=outcome, now=self.ctx.clock.now()
            )

    async def _postpone(self, touchpoint_id: int, until: datetime) -> None:
        async with self.ctx.sessions() as session, session.begin():
            await TouchpointRepository(session).postpone(touchpoint_id, self.holder, until)

    async def _retry_later(self, touchpoint_id: int, error: str) -> None:
        """Give the row back, to be leased again after its backoff (a sending row resumes its send)."""
        now = self.ctx.clock.now()
        async with self.ctx.sessions() as session, session.begin():
            repo = TouchpointRepository(session)
            await repo.retry_later(touchpoint_id, self.holder, now=now, error=error, retry=RETRY)

    async def _unreachable(self, touchpoint_id: int, user_id: int) -> None:
        """Telegram refused the chat: the user is skipped until they write again; an unsent message
        leaves no trace in their transcript."""
        now = self.ctx.clock.now()
        async with self.ctx.sessions() as session, session.begin():
            await TouchpointRepository(session).undeliverable(touchpoint_id, self.holder, user_id, now=now)


async def _hold(repo: TouchpointRepository, touchpoint_id: int, holder: str) -> tuple[Touchpoint, User]:
    """The row under this worker's lease and its person's row locked; LeaseLostError otherwise."""
    held = await repo.hold(touchpoint_id, holder)
    if held is None:
        raise LeaseLostError
    return held


async def _subject(session: AsyncSession, row: Touchpoint, user: User, now: datetime) -> Subject:
    repo = TouchpointRepository(session)
    thread_open = await repo.thread_open(row.thread_id)
    return Subject(
        timezone=user.timezone,
        followups=user.followups,
        unreachable=user.unreachable_at is not None
        and (user.last_message_at is None or user.last_message_at < user.unreachable_at),
        onboarded=user.onboarding_status == "complete",
        last_message_at=user.last_message_at,
        thread_open=thread_open,
        planned_at=row.planned_at,
        sent_this_week=await repo.sent_since(user.id, now - WEEK),
        last_sent_at=await repo.last_sent_at(user.id),
    )
