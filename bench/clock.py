"""A clock that stands still until told to move: benchmarks and tests set "now" themselves."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from agent.core.clock import Clock, ensure_utc, system_now


@dataclass
class FrozenClock(Clock):
    """The product's `Clock` at a fixed instant that moves only by `advance`."""

    current: datetime = field(default_factory=system_now)

    def __post_init__(self) -> None:
        self.current = ensure_utc(self.current)
        self.source = lambda: self.current

    def advance(self, delta: timedelta) -> None:
        """Move time forward."""
        self.current += delta
