"""One database session the context's collectors read in, one collector at a time.

A session costs a turn more Python than the statement it runs (its checkout, its transaction and
its reset on return), and the collectors each read once or twice. They still start together, each
under its own timeout (agent/context/package.py): here they take turns on one session, in the order
they started. A collector that fails or is cancelled (its timeout) takes the session with it, so
the next one starts on a fresh session: a failed statement never leaves the others a transaction
PostgreSQL has aborted, nor a connection still busy with a cancelled query.

On PostgreSQL the session reads without a transaction (autocommit): under READ COMMITTED each
statement reads its own snapshot anyway, so a transaction around them only cost its BEGIN and its
ROLLBACK, two round trips a turn. Nothing the collectors run writes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from weakref import WeakKeyDictionary

from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

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
