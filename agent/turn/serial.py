"""One conversation's turns run one at a time, in arrival order; different conversations side by side.

A turn's frame asks for this in one place: `async with turns.serial(key)`, a queue per key in this
process. On Telegram the inbox serialises across instances: it leases one row per conversation at a
time, so a Telegram turn finds its key's queue empty and passes straight through (an uncontended
asyncio lock). Surfaces without an inbox row (the terminal chat, a voice call's transcript,
onboarding driven directly) wait here behind the key's other turns. Across processes those writes
rely on storage that stays consistent without a lock: a turn appends its messages in one statement
and never overwrites another writer's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from agent.core.bounded import KeyedLocks


class TurnQueue:
    """Per-key ordered queues of turns in this process (asyncio locks are FIFO)."""

    def __init__(self) -> None:
        # A key's lock exists only while a turn holds or awaits it: bounded by turns in flight.
        self._locks: KeyedLocks[int] = KeyedLocks()

    def __len__(self) -> int:
        """Conversations with a turn running or waiting here right now."""
        return len(self._locks)

    @asynccontextmanager
    async def serial(self, key: int) -> AsyncIterator[None]:
        """Run the body as the conversation's only turn in this process."""
        async with self._locks.hold(key):
            yield
