"""How the context's collectors run: each under its own timeout, and those that read the database
on one session, one at a time.

A session costs a turn more Python than the statement it runs (its checkout, its transaction and
its reset on return), and the collectors each read once or twice. `read_in_turn` runs the database's
collectors one after another in one task (as tasks of their own they would only take turns on the
session), each under its own timeout counted from the collection's start (`collect`), so a slow one
leaves the next less time rather than the whole collection more. A collector that fails or is
cancelled (its timeout) takes the session with it (`SharedReads`), so the next one starts on a fresh
session: a failed statement never leaves the others a transaction PostgreSQL has aborted, nor a
connection still busy with a cancelled query.

On PostgreSQL the session reads without a transaction (autocommit): under READ COMMITTED each
statement reads its own snapshot anyway, so a transaction around them only cost its BEGIN and its
ROLLBACK, two round trips a turn. Nothing the collectors run writes.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Literal
from weakref import WeakKeyDictionary

from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.core import observability
from agent.core.errors import NikitaError
from agent.core.redaction import describe_error

logger = logging.getLogger(__name__)

# What a collector may raise that must not break the turn: storage, time, bad stored data, the graph.
COLLECTOR_ERRORS = (SQLAlchemyError, OSError, TimeoutError, NikitaError, ValueError, TypeError, KeyError)

Status = Literal["ok", "empty", "failed", "timeout", "not configured"]

# Each PostgreSQL engine's autocommit view (the same pool), made once.
_AUTOCOMMIT: WeakKeyDictionary[AsyncEngine, AsyncEngine] = WeakKeyDictionary()


def _reading_bind(sessions: async_sessionmaker[AsyncSession]) -> AsyncEngine | None:
    """The engine the reads run on: the sessions' own, in autocommit on PostgreSQL (None: as is)."""
    bind = sessions.kw.get("bind")
    if not isinstance(bind, AsyncEngine) or bind.dialect.name != "postgresql":
        return None
    view = _AUTOCOMMIT.get(bind)
    if view is None:
        view = _AUTOCOMMIT[bind] = bind.execution_options(isolation_level="AUTOCOMMIT")
    return view


class SharedReads:
    """Runs reads on one session, one at a time; closed by `close` (or dropped after a failure)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._bind = _reading_bind(sessions)
        self._turn = asyncio.Lock()
        self._session: AsyncSession | None = None

    async def run[T](self, load: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """`load` on the shared session, once the reads before it are done."""
        async with self._turn:
            if self._session is None:
                self._session = self._sessions() if self._bind is None else self._sessions(bind=self._bind)
            session = self._session
            try:
                return await load(session)
            except BaseException:
                self._session = None
                await session.close()
                raise

    async def close(self) -> None:
        """End the session (its transaction only read: rolled back)."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()


@dataclass(frozen=True)
class Collected[T]:
    """One collector's result: its value (None when empty or failed), how it went, how long it took."""

    value: T | None
    status: Status
    ms: float
    error: str | None = None


async def collect[T](
    name: str, limit_seconds: float, load: Callable[[], Awaitable[T | None]], *, since: float | None = None
) -> Collected[T]:
    """Run one collector under its timeout, counted from `since` (time.perf_counter(); now by
    default); its failure is its own result, never raised. While tracing, the collection is the
    tier's span (its tokens are added once the context is fitted)."""
    with observability.tier_span(name) as traced:
        collected = await _collect(name, limit_seconds, load, time.perf_counter() if since is None else since)
        if traced.is_recording():
            traced.set_attribute("nikita.tier.status", collected.status)
    return collected


async def _collect[T](
    name: str, limit_seconds: float, load: Callable[[], Awaitable[T | None]], started: float
) -> Collected[T]:
    def ms() -> float:
        return round((time.perf_counter() - started) * 1000, 2)

    try:
        left = limit_seconds - (time.perf_counter() - started)
        if left <= 0:  # the collectors before it took its time: not started at all
            raise TimeoutError
        value = await asyncio.wait_for(load(), timeout=left)
    except TimeoutError:
        logger.warning("context collector timed out", extra={"tier": name, "timeout": limit_seconds})
        return Collected(None, "timeout", ms(), f"timed out after {limit_seconds:g} s")
    except COLLECTOR_ERRORS as exc:
        logger.warning("context collector failed", extra={"tier": name}, exc_info=exc)
        return Collected(None, "failed", ms(), describe_error(exc)[:300])
    empty = value is None or (isinstance(value, tuple) and not value)
    return Collected(None if empty else value, "empty" if empty else "ok", ms())


@dataclass(frozen=True)
class Reader:
    """A collector that reads the database: its part, its timeout, its read and where its result goes."""

    name: str
    limit: float
    load: Callable[[AsyncSession], Awaitable[object]]
    done: asyncio.Future[Collected[object]]


async def read_in_turn(shared: SharedReads, readers: list[Reader], started: float) -> None:
    """The database's collectors one after another on the shared session, each under its own timeout
    from `started`; one cancelled leaves the rest cancelled too (none is left waiting)."""
    try:
        for reader in readers:
            read = partial(shared.run, reader.load)
            reader.done.set_result(await collect(reader.name, reader.limit, read, since=started))
    finally:
        for reader in readers:
            if not reader.done.done():
                reader.done.cancel()
