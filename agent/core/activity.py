"""Turns in flight in this process, for work that waits until no turn runs (the start-up work).

A turn is busy for as long as the turn frame runs it (agent/turn/frame.py). `quiet()` returns once
no turn has run for `settle_seconds`, so a step of background work starts in a pause rather than
beside a turn; and, with `at_most`, after that long however busy the process is, so work that
must happen eventually is never starved by steady traffic.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Activity:
    """How many turns run now, and when the last one ended."""

    def __init__(self, *, settle_seconds: float = 0.3) -> None:
        self.settle_seconds = settle_seconds
        self._running = 0
        self._last_end = float("-inf")  # time.monotonic() of the last turn's end

    @property
    def in_flight(self) -> int:
        """Turns running now."""
        return self._running

    @contextmanager
    def busy(self) -> Iterator[None]:
        """Count the block as a turn in flight."""
        self._running += 1
        try:
            yield
        finally:
            self._running -= 1
            self._last_end = time.monotonic()

    def touch(self) -> None:
        """Count now as a turn's end: the next quiet moment is `settle_seconds` away."""
        self._last_end = time.monotonic()

    def is_quiet(self) -> bool:
        """No turn runs, and none ended within `settle_seconds`."""
        return self._running == 0 and time.monotonic() - self._last_end >= self.settle_seconds

    async def quiet(self, *, at_most: float | None = None) -> bool:
        """Wait until `is_quiet()` (True), or `at_most` seconds (False: the caller goes on anyway)."""
        deadline = None if at_most is None else time.monotonic() + at_most
        while not self.is_quiet():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            # Polled: no turn pays for waking a waiter, and a step starting 50 ms late costs nothing.
            await asyncio.sleep(min(0.05, self.settle_seconds))
        return True
