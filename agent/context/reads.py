"""One database session the context's collectors read in, one collector at a time.

A session costs a turn more Python than the statement it runs (its checkout, its transaction and
its reset on return), and the collectors each read once or twice. They still start together, each
under its own timeout (agent/context/package.py): here they take turns on one session, in the order
they started. A collector that fails or is cancelled (its timeout) takes the session with it, so
the next one starts on a fresh session: a failed statement never leaves the others a transaction
PostgreSQL has aborted, nor a connection still busy with a cancelled query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker


class SharedReads:
    """Runs reads on one session, one at a time; closed by `close` (or dropped after a failure)."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self._sessions = sessions
        self._turn = asyncio.Lock()
        self._session: AsyncSession | None = None

    async def run[T](self, load: Callable[[AsyncSession], Awaitable[T]]) -> T:
        """`load` on the shared session, once the reads before it are done."""
        async with self._turn:
            if self._session is None:
                self._session = self._sessions()
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
