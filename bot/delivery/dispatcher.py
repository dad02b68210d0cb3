"""The inbox dispatcher: leases the head of each chat's queue and works it through the handlers.

- Order and fairness: the inbox hands out at most one row per chat at a time, oldest first (see
  `db/inbox.py`), so a chat's updates are handled in order across processes, and a burst of 300
  messages from one person occupies one worker slot while everyone else's rows go past it. At most
  `concurrency` rows are worked at once (MAX_CONCURRENT_TURNS).
- Leases: a worked row is leased to this process; one heartbeat renews the rows being worked (and
  tells each row until when it is surely still ours: `WorkedRow.held_until`). A process that dies
  stops renewing; any instance takes its rows over when the leases run out, and at start and
  every `poll_seconds` resumes whatever a stopped process left.
- Retries, in this one place: a transient error anywhere in a row's work (db/transient.py, or
  Telegram's network errors) re-runs the row with backoff; every step is idempotent (the inbox
  dedupes updates, the transcript dedupes messages and gives their answers back). After
  `retry_seconds` the user gets an honest "I'll answer when I can"; the row stays and is answered
  once the database is back. A row started `max_attempts` times (crashes included), or failing
  for a reason that is not transient, is given up with an apology (one poisonous update never
  blocks its chat) and ends `dead`, with the reason, for /stats.
- Graceful stop: no new claims; rows in flight get `grace` seconds; the rest are cancelled, their
  leases released so the next instance resumes them at once.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from contextlib import suppress
from datetime import datetime, timedelta

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot
from telegram.error import RetryAfter, TelegramError

from agent.core import observability
from agent.core.clock import Clock
from agent.core.errors import LeaseLostError
from bot.delivery.failures import DELAYED_REPLY, ERROR_REPLY, is_retryable
from bot.delivery.worked_row import WorkedRow
from db.inbox import InboxRepository, LeasedUpdate
from db.stops import prune_stops
from db.transient import Backoff
from db.uninterrupted import collect_abandoned_connections, uninterrupted
from db.work import Retry

logger = logging.getLogger(__name__)

PRUNE_EVERY = 600.0  # seconds between deletions of old finished rows
# What a row's work may raise that is about the row, not a bug: logged, the row retried later.
ROW_ERRORS = (SQLAlchemyError, OSError, TelegramError, TimeoutError)

Process = Callable[[WorkedRow], Awaitable[None]]
Stored = asyncio.Future[bool] | None  # resolves once the intake's commit of the rows ended (True: committed)
Claim = tuple[int, int] | None  # when a row's claim started and ended (time.time_ns), for its trace


def new_holder() -> str:
    """This process's name on the leases it holds."""
    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Dispatcher:
    """Claims inbox rows and works each one: `process` runs the handlers, then the reply is sent."""

    def __init__(
        self,
        *,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        bot: Bot,
        process: Process,
        concurrency: int,
        lease_seconds: float,
        poll_seconds: float,
        max_attempts: int,
        retry_seconds: float,
        retention: timedelta,
        single_process: bool,
        holder: str | None = None,
    ) -> None:
        self.sessions, self.clock, self.bot, self.process = sessions, clock, bot, process
        self.concurrency = max(1, concurrency)
        self.lease = timedelta(seconds=lease_seconds)
        self.poll_seconds, self.retry_seconds, self.retention = poll_seconds, retry_seconds, retention
        self.retry = Retry(max_attempts, base_seconds=2.0, max_seconds=300.0)  # after a crash: 2 s ... 5 min
        self.single_process = single_process
        self.holder = holder or new_holder()
        self.worked = 0
        self._tasks: dict[int, asyncio.Task[None]] = {}
        self._reserved = 0  # slots promised to an intake that leases its own rows
        self._deliveries: dict[int, WorkedRow] = {}
        self._unstored: dict[int, asyncio.Future[bool]] = {}  # rows whose intake is still committing
        self._finished: dict[int, asyncio.Event] = {}
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._stopping = False
        self._loop_task: asyncio.Task[None] | None = None
        self._last_prune = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        """Start claiming and working rows in the background."""
        self._loop_task = asyncio.create_task(self._run(), name="inbox-dispatcher")

    def wake(self) -> None:
        """There may be new rows (one was just stored, or a chat's row finished)."""
        self._wake.set()

    async def stop(self, grace: float) -> None:
        """Stop claiming; give rows in flight `grace` seconds; cancel and release the rest."""
        self._stopping = True
        self.wake()
        if self._loop_task is not None:
            with suppress(asyncio.CancelledError):
                await self._loop_task
        tasks = list(self._tasks.values())
        logger.info("inbox draining", extra={"in_flight": len(tasks), "grace_seconds": grace})
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=max(0.0, grace))
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if pending:
                collect_abandoned_connections()  # a turn cut mid-write must not lock out the release
            # A send cut short here would be the crash window: let it finish (one HTTP call).
            sending = [d.sending for d in self._deliveries.values() if d.sending is not None]
            if sending:
                await asyncio.wait(sending, timeout=5)
        await self._release_all()

    # -- the intake's hand-off -------------------------------------------------------------------------
    def reserve(self, wanted: int) -> int:
        """Promise up to `wanted` free slots to an intake that leases rows in its own transaction."""
        if self._stopping:
            return 0
        granted = max(0, min(wanted, self.concurrency - len(self._tasks) - self._reserved))
        self._reserved += granted
        return granted

    def adopt(
        self, rows: list[LeasedUpdate], reserved: int, stored: Stored = None, claimed: Claim = None
    ) -> None:
        """Work the rows an intake leased for this process (and give back the unused promise).

        `stored` resolves once the intake's transaction ended (True: committed); until then the
        rows are worked without writing to them, and their leases are not checked.
        """
        self._reserved -= reserved
        for row in rows:
            self._start(row, stored, claimed)
        if len(rows) < reserved:
            # Unused promised slots are free again; a row handed over wakes the loop when it ends.
            self.wake()

    # -- what the web app asks ---------------------------------------------------------------------
    async def wait_until_answered(self, update_id: int, *, within: float) -> bool:
        """Wait (at most `within` seconds) until this process finished the update; False if not."""
        try:
            return await self._waited(self._finished.setdefault(update_id, asyncio.Event()), within)
        finally:
            self._finished.pop(update_id, None)

    async def drain(self, *, within: float) -> bool:
        """Wake the workers and wait until nothing is claimable or in flight; False on timeout."""
        self._idle.clear()
        return await self._waited(self._idle, within)

    async def _waited(self, event: asyncio.Event, within: float) -> bool:
        self.wake()
        try:
            await asyncio.wait_for(event.wait(), within)
            return True
        except TimeoutError:
            return False

    # -- the loop ------------------------------------------------------------------------------------
    async def _run(self) -> None:
        heartbeat = asyncio.create_task(self._heartbeat(), name="inbox-heartbeat")
        try:
            if self.single_process:
                # SQLite is one process: every lease left in the table belongs to a process that died.
                await self._release_all(everyone=True)
            while not self._stopping:
                self._wake.clear()
                claimed = await self._claim()
                if not claimed and not self._tasks and not self._wake.is_set():
                    self._idle.set()  # not if woken since the claim began: it may have missed rows
                await self._maybe_prune()
                if claimed and len(self._tasks) < self.concurrency:
                    continue  # there may be more right away
                with suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
        finally:
            heartbeat.cancel()
            with suppress(asyncio.CancelledError):
                await heartbeat

    async def _claim(self) -> int:
        free = self.concurrency - len(self._tasks) - self._reserved
        if free <= 0:
            return 0
        started = time.time_ns()  # each row's trace starts with its claim
        try:
            async with self.sessions() as session, session.begin():
                repo = InboxRepository(session)
                await repo.relax_durability()  # a lease lost with the server is simply taken again
                rows = await repo.claim(
                    holder=self.holder, now=self.clock.now(), lease=self.lease, limit=free
                )
        except ROW_ERRORS as exc:
            logger.warning("inbox claim failed", extra={"error": repr(exc)})
            return 0
        for row in rows:
            self._start(row, claimed=(started, time.time_ns()))
        return len(rows)

    def _start(self, row: LeasedUpdate, stored: Stored = None, claimed: Claim = None) -> None:
        if row.id in self._tasks:
            # Still worked here: its lease ran out (a renewal came late) and this process took it
            # again. The worker goes on under the new lease; a second one would answer twice.
            return
        work = self._work(row, stored, claimed)
        self._tasks[row.id] = asyncio.create_task(work, name=f"inbox-{row.update_id}")
        if stored is not None and not stored.done():
            self._unstored[row.id] = stored
            stored.add_done_callback(lambda _: self._unstored.pop(row.id, None))

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(self.lease.total_seconds() / 3)
            if not self._tasks:
                continue
            # Only the rows worked now: one claimed while the renewal runs was not asked about. A row
            # whose intake has not committed yet is invisible to the renewal, and not lost either.
            working = [row_id for row_id in self._tasks if row_id not in self._unstored]
            surely_ours = self.clock.now() + self.lease / 2
            try:
                held = await uninterrupted(self._renew(working))
            except ROW_ERRORS as exc:
                logger.warning("inbox lease renewal failed", extra={"error": repr(exc)})
                continue
            for delivery in (d for d in self._deliveries.values() if d.row.id in held):
                delivery.held_until = surely_ours
            for row_id in working:
                task = self._tasks.get(row_id)
                if row_id not in held and task is not None and not task.done():
                    logger.warning("inbox lease lost; another worker has the row", extra={"row_id": row_id})
                    task.cancel()

    async def _renew(self, working: list[int]) -> set[int]:
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            await repo.relax_durability()
            return await repo.renew(working, holder=self.holder, now=self.clock.now(), lease=self.lease)

    async def _maybe_prune(self) -> None:
        loop_time = asyncio.get_running_loop().time()
        if loop_time - self._last_prune < PRUNE_EVERY and self._last_prune:
            return
        self._last_prune = loop_time
        try:
            async with self.sessions() as session, session.begin():
                cut = self.clock.now() - self.retention
                pruned = await InboxRepository(session).prune(done_before=cut)
                await prune_stops(session, before=cut)
        except ROW_ERRORS as exc:
            logger.warning("inbox prune failed", extra={"error": repr(exc)})
            return
        if pruned:
            logger.info("inbox pruned", extra={"rows": pruned})

    # -- one row ---------------------------------------------------------------------------------------
    async def _work(self, row: LeasedUpdate, stored: Stored, claimed: Claim) -> None:
        ours = self.clock.now() + self.lease / 2  # claimed just now: half its lease is surely ours
        delivery = WorkedRow(row, self.holder, self.sessions, self.clock, stored=stored, held_until=ours)
        self._deliveries[row.update_id] = delivery
        try:
            # The root of the turn's trace: the claim, the handlers (the turn frame's spans), the send.
            with observability.inbox_span(row.update_id or 0, row.attempts, claimed):
                await self._work_until_done(delivery)
        except LeaseLostError as exc:
            logger.info("inbox row left", extra={"update_id": row.update_id, "why": str(exc)})
        except asyncio.CancelledError:
            await self._release(delivery, "stopped before it finished")
            raise
        except Exception as exc:
            # A bug in the row's work: logged with its traceback, the row tried again later (and
            # given up after max_attempts), so it never blocks its chat's queue for good.
            logger.exception("inbox row crashed", extra={"update_id": row.update_id})
            delay = self.retry.after(row.attempts).total_seconds()
            await self._release(delivery, repr(exc)[:500], delay=delay)
        finally:
            self.worked += 1
            self._tasks.pop(row.id, None)
            self._deliveries.pop(row.update_id, None)
            if (event := self._finished.get(row.update_id)) is not None and delivery.status == "done":
                event.set()
            self.wake()  # a slot is free, and the chat's next row may be claimable now

    async def _work_until_done(self, delivery: WorkedRow) -> None:
        backoff = Backoff(self.retry_seconds)
        told_user = False
        while True:
            try:
                await self._attempt(delivery)
                return
            except LeaseLostError:
                raise
            except ROW_ERRORS as exc:
                if not is_retryable(exc):
                    await self._failed(delivery, exc)
                    return
                delay = backoff.next_delay()
                logger.warning(
                    "inbox row failed, retrying",
                    extra={"update_id": delivery.row.update_id, "error": repr(exc), "delay": delay},
                )
                if delay is None:
                    if not told_user:
                        told_user = await self._tell(delivery, DELAYED_REPLY)
                    delay = backoff.cap
                if isinstance(exc, RetryAfter):  # Telegram's flood control says how long to wait
                    delay = max(
                        delay,
                        exc.retry_after.total_seconds()
                        if isinstance(exc.retry_after, timedelta)
                        else exc.retry_after,
                    )
                await asyncio.sleep(delay)
                with suppress(*ROW_ERRORS):
                    # What did the failed try commit? (An answer given before the failure is only sent.)
                    await delivery.reload()

    async def _attempt(self, delivery: WorkedRow) -> None:
        if delivery.status == "pending" and delivery.reply is None:
            if delivery.row.attempts > self.retry.max_attempts:  # the last attempt failed
                logger.error("inbox row given up", extra={"update_id": delivery.row.update_id})
                await self._tell(delivery, ERROR_REPLY)
                await delivery.close("dead", f"given up after {delivery.row.attempts - 1} attempts")
                return
            delivery.error = None
            await self.process(delivery)
            if (error := delivery.error) is not None:
                if isinstance(error, LeaseLostError) or is_retryable(error):
                    raise error
                # A handler failed (logged by the error handler). Did it give an answer first?
                await delivery.reload()
                if delivery.status == "pending" and delivery.reply is None:
                    await self._tell(delivery, ERROR_REPLY)
                    await delivery.close("dead", repr(error)[:500])
                    return
        with observability.span("send"):
            await delivery.finish(self.bot)

    async def _failed(self, delivery: WorkedRow, exc: BaseException) -> None:
        logger.error("inbox row failed", extra={"update_id": delivery.row.update_id, "error": repr(exc)})
        outcome = "undeliverable" if isinstance(exc, TelegramError) else "dead"
        try:
            await delivery.close(outcome, repr(exc)[:500])
        except ROW_ERRORS as again:
            logger.error("inbox row could not be closed", extra={"error": repr(again)})

    async def _tell(self, delivery: WorkedRow, text: str) -> bool:
        if delivery.chat_id is None:
            return False
        try:
            await delivery.tell(self.bot, text)
        except TelegramError as exc:
            logger.warning("could not tell the user", extra={"error": repr(exc)})
            return False
        return True

    async def _release(self, delivery: WorkedRow, why: str, *, delay: float = 0.0) -> None:
        at = self.clock.now() + timedelta(seconds=delay)
        with suppress(*ROW_ERRORS, LeaseLostError, asyncio.CancelledError):
            async with asyncio.timeout(2):
                await delivery.wait_stored()
            async with asyncio.timeout(2):
                await uninterrupted(self._release_row(delivery.row.id, at, why))

    async def _release_row(self, row_id: int, at: datetime, why: str) -> None:
        async with self.sessions() as session, session.begin():
            await InboxRepository(session).release(row_id, holder=self.holder, available_at=at, error=why)

    async def _release_all(self, *, everyone: bool = False) -> None:
        with suppress(*ROW_ERRORS):
            async with asyncio.timeout(3):
                released = await uninterrupted(self._release_rows(everyone))
            if released:
                logger.info("inbox leases released", extra={"rows": released, "everyone": everyone})

    async def _release_rows(self, everyone: bool) -> int:
        async with self.sessions() as session, session.begin():
            repo = InboxRepository(session)
            await repo.relax_durability()
            return await repo.release_all(holder=None if everyone else self.holder)
