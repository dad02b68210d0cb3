"""The stop button on streamed drafts: the press ends the turn writing that draft, in any instance.

Every draft is sent with `can_stop` (and `keep_on_stop`, so what was written stays on screen). A
press arrives as a `stopped_message_generation` update (chat and draft id). It has no sender, so
the inbox stores it done on arrival, with the stop in `draft_stops` (db/stops.py), instead of
queueing it behind the turn it stops. Then:
- the instance that stored it cancels the turn at once if the turn runs there (`heard`);
- an instance running a turn looks for its stop in the database every `poll_seconds` while the
  turn runs (PostgreSQL only: SQLite is one process, where the first way always holds).
A stop for a draft no turn is writing any more changes nothing. The turn's run is cancelled through
PydanticAI's `CancellationToken`; agent/turn/run.py keeps what was written.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator

from pydantic_ai import CancellationToken
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.stops import is_stopped

logger = logging.getLogger(__name__)


class Stops:
    """The drafts this process is writing, each with the token that cancels its turn."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession], *, poll_seconds: float | None) -> None:
        self.sessions = sessions
        self.poll_seconds = poll_seconds  # None: only stops heard by this process count
        self._running: dict[tuple[int, int], CancellationToken] = {}

    def heard(self, chat_id: int, draft_id: int) -> None:
        """A stop was stored: cancel that draft's turn if this process runs it."""
        token = self._running.get((chat_id, draft_id))
        if token is not None and not token.cancelled:
            logger.info("draft stopped by the user", extra={"chat_id": chat_id, "draft_id": draft_id})
            token.cancel()

    @contextlib.asynccontextmanager
    async def watch(self, chat_id: int, draft_id: int) -> AsyncIterator[CancellationToken]:
        """The token that cancels the turn writing this draft, while the block runs."""
        key, token = (chat_id, draft_id), CancellationToken()
        self._running[key] = token
        poll = asyncio.create_task(self._poll(key, token)) if self.poll_seconds else None
        try:
            yield token
        finally:
            if self._running.get(key) is token:
                del self._running[key]
            if poll is not None:
                poll.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await poll

    async def _poll(self, key: tuple[int, int], token: CancellationToken) -> None:
        assert self.poll_seconds is not None
        while not token.cancelled:
            await asyncio.sleep(self.poll_seconds)
            try:
                async with self.sessions() as session:
                    stopped = await is_stopped(session, *key)
            except (SQLAlchemyError, OSError) as exc:  # the next look may find it; the turn goes on
                logger.debug("stop not looked up", extra={"error": repr(exc)})
                continue
            if stopped:
                self.heard(*key)
                return
