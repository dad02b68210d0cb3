"""Database work that a cancellation waits for instead of cutting: `uninterrupted`.

A task cancelled while it awaits a statement of an open write transaction leaves SQLite locked.
SQLAlchemy invalidates the connection, but the sqlite3 connection behind it closes only when its
half-read cursors are garbage-collected, and until then it holds the database's one write lock:
every other writer waits out `busy_timeout` (30 s) and fails with "database is locked" (measured:
a SIGTERM that cancelled the polling loop inside its intake commit wedged the whole process until
the host killed it). PostgreSQL rolls the transaction back when the connection goes; SQLite needs
the transaction to end on its own.

So the short write transactions that a stop, a lease loss or a timeout may cancel (the intake's
commit, lease renewals, releases) run to their end first; the caller is cancelled right after,
as it asked. Where a whole turn is cancelled mid-way (a stop's grace ran out),
`collect_abandoned_connections` frees what the cancellation left.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Coroutine
from typing import Any


async def uninterrupted[T](work: Coroutine[Any, Any, T]) -> T:
    """Await `work` to its end even if the caller is cancelled meanwhile; then re-raise the cancellation."""
    me = asyncio.current_task()
    asked_before = me.cancelling() if me is not None else 0
    task = asyncio.ensure_future(work)
    cancelled: asyncio.CancelledError | None = None
    while True:
        try:
            await asyncio.shield(task)
        except asyncio.CancelledError as exc:
            if me is not None and me.cancelling() > asked_before:
                cancelled = exc  # the caller's: wait on for the work, then give it back
                if not task.done():
                    continue
            elif not task.done():
                continue
            else:
                raise  # the work itself was cancelled
        except BaseException:
            if cancelled is None:
                raise
        break
    if cancelled is not None:
        if not task.cancelled():
            task.exception()  # retrieved: the caller's cancellation is the answer it asked for
        raise cancelled
    return task.result()


def collect_abandoned_connections() -> None:
    """Free the SQLite connections of cancelled tasks now (see the module docstring) rather than at
    the next garbage collection: their locks go with them."""
    gc.collect()
