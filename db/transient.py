"""Which database errors a retry can fix, and the backoff between retries.

A transient error is one where the same statement would succeed a moment later: the connection
dropped (`pg_terminate_backend`, a failover, a network blip), the server is restarting or shutting
down ("the database system is shutting down" / "is starting up"), too many connections, a
serialization failure or deadlock, or SQLite's "database is locked". Everything else (a constraint,
a bad statement, a bug) is not retried.

The retry itself lives in one place, the inbox dispatcher (`bot/delivery/dispatcher.py`), which
re-runs the whole update: every step of a turn is idempotent against the inbox and the transcript.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field

from sqlalchemy.exc import DBAPIError, DisconnectionError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

# SQLSTATE codes (PostgreSQL appendix A): connection exceptions (class 08), the server going away
# or coming up, too many connections, and the two conflicts a retry resolves.
_TRANSIENT_PREFIXES = ("08",)
_TRANSIENT_CODES = frozenset({"57P01", "57P02", "57P03", "53300", "40001", "40P01"})
_SQLITE_BUSY = ("database is locked", "database table is locked", "database is busy")
_DISCONNECT_WORDS = ("connection is closed", "connection was closed", "the database system is")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    """The error, what it wraps (`orig`) and what caused it, each once."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        # Explicit links only: an unrelated error raised while handling a transient one is not transient.
        for linked in (getattr(current, "orig", None), current.__cause__):
            if isinstance(linked, BaseException):
                todo.append(linked)


def is_transient(exc: BaseException) -> bool:
    """True when the error says "try again shortly" rather than "this will never work"."""
    for error in _chain(exc):
        if isinstance(error, DBAPIError) and error.connection_invalidated:
            return True
        if isinstance(error, DisconnectionError | PoolTimeoutError | ConnectionError):
            return True
        code = getattr(error, "sqlstate", None) or getattr(error, "pgcode", None)
        if isinstance(code, str) and (code in _TRANSIENT_CODES or code.startswith(_TRANSIENT_PREFIXES)):
            return True
        message = str(error).lower()
        if isinstance(error, sqlite3.OperationalError) and any(m in message for m in _SQLITE_BUSY):
            return True
        if type(error).__module__.startswith("asyncpg") and any(w in message for w in _DISCONNECT_WORDS):
            return True
    return False


@dataclass
class Backoff:
    """Exponential delays with jitter (0.1 s, 0.2 s, ... up to `cap`), within a `total`."""

    total: float
    first: float = 0.1
    cap: float = 5.0
    spent: float = field(default=0.0, init=False)
    _next: float = field(default=0.0, init=False)

    def next_delay(self) -> float | None:
        """The pause before the next try, or None once the total is spent."""
        if self.spent >= self.total:
            return None
        self._next = min(self.cap, self._next * 2 if self._next else self.first)
        delay = min(self._next * random.uniform(0.8, 1.2), self.total - self.spent)
        self.spent += delay
        return delay
