"""The gauges read from the database: inbox depth, its oldest waiting update, each job's lag.

OpenTelemetry observes gauges through synchronous callbacks (in the exporter's thread), which cannot
query an async database: the sampler refreshes its figures in the event loop (every `interval`
seconds while OTLP metrics are pushed, and before each Prometheus scrape) and the callbacks read
the last figures. One small query per table, whatever the number of users.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass, field

from opentelemetry.metrics import CallbackOptions, Meter, Observation
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock
from db.repositories.operations import OperationsRepository

logger = logging.getLogger(__name__)


@dataclass
class Sampler:
    """The last figures read, and the database and clock to read them from (set once the runtime is up)."""

    sessions: async_sessionmaker[AsyncSession] | None = None
    clock: Clock | None = None
    inbox: dict[str, int] = field(default_factory=dict)
    oldest_wait: float | None = None
    lag: dict[str, float] = field(default_factory=dict)
    _task: asyncio.Task[None] | None = None

    def observe(self, meter: Meter) -> None:
        """Register the gauges on `meter`; they report whatever the last refresh read."""
        meter.create_observable_gauge(
            "nikita.inbox.depth", [self._depth], unit="{update}", description="Inbox updates to answer"
        )
        meter.create_observable_gauge(
            "nikita.inbox.oldest_wait",
            [self._oldest],
            unit="s",
            description="How long the oldest update still to answer has waited",
        )
        meter.create_observable_gauge(
            "nikita.job.lag",
            [self._lag],
            unit="s",
            description="How long each job's oldest due work has waited",
        )

    async def refresh(self) -> None:
        """Read the figures again (a database that does not answer leaves the last ones)."""
        if self.sessions is None or self.clock is None:
            return
        now = self.clock.now()
        try:
            async with self.sessions() as session:
                backlog = await OperationsRepository(session).backlog(now)
        except (SQLAlchemyError, OSError) as exc:
            logger.warning("metrics sample failed", extra={"error": repr(exc)})
            return
        self.inbox = dict(backlog.inbox)
        self.oldest_wait = (now - backlog.oldest_waiting).total_seconds() if backlog.oldest_waiting else 0.0
        self.lag = {job: max((now - since).total_seconds(), 0.0) for job, since in backlog.due_since.items()}
        for job in ("postprocess", "touchpoints", "day-summaries"):
            self.lag.setdefault(job, 0.0)

    def start(
        self, sessions: async_sessionmaker[AsyncSession], clock: Clock, *, interval: float | None
    ) -> None:
        """Read from this database from now on; with `interval`, refresh that often in the background."""
        self.sessions, self.clock = sessions, clock
        if interval is not None and self._task is None:
            self._task = asyncio.create_task(self._every(interval), name="metrics-sampler")

    def cancel(self) -> None:
        """Stop refreshing, without waiting."""
        if self._task is not None:
            self._task.cancel()

    async def stop(self) -> None:
        """Stop refreshing, and wait for it."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _every(self, interval: float) -> None:
        while True:
            await self.refresh()
            await asyncio.sleep(interval)

    def _depth(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(count, {"status": status}) for status, count in self.inbox.items()]

    def _oldest(self, options: CallbackOptions) -> Iterable[Observation]:
        return [] if self.oldest_wait is None else [Observation(self.oldest_wait)]

    def _lag(self, options: CallbackOptions) -> Iterable[Observation]:
        return [Observation(seconds, {"job": job}) for job, seconds in self.lag.items()]
