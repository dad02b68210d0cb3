"""The work queue: how every kind of background work that must survive a crash claims its rows.

Each kind of work keeps its items in its own table (inbox updates, conversations to post-process,
people due for tidying, touchpoints and reminders, import runs) and names its columns and what
makes a row due; claiming, the retry policy and the count of dead items are here, once:

- **Claim**: one `UPDATE … WHERE key IN (SELECT … LIMIT n) RETURNING …`. On PostgreSQL the
  subquery is `FOR UPDATE SKIP LOCKED`, so two instances never take one row and neither waits for
  the other; SQLite runs one writer at a time and its `UPDATE` takes the write lock before it
  reads, so the same statement is atomic there (SQLite drops the locking clause).
- **Lease**: the claim writes its holder (the worker's id) and the lease's end, and counts the
  attempt; a holder renews while it works; a lease that runs out is a holder that died, and the
  row is due again. Every later write of a claimed row checks that the lease is still the holder's.
- **Retry**: a failed attempt waits `Retry.after(attempts)` (exponential, capped); after the last
  attempt the item is dead, kept with its reason; `dead_items` counts them (the /stats report).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BigInteger, ColumnElement, Select, Update, and_, bindparam, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Conversation, FactConsolidation, InboxUpdate, Touchpoint, UTCDateTime


def backoff(attempts: int, base_seconds: float, max_seconds: float) -> timedelta:
    """The wait after the n-th failed attempt: base, 2*base, 4*base ... capped at `max_seconds`."""
    return timedelta(seconds=min(max_seconds, base_seconds * 2 ** max(0, attempts - 1)))


@dataclass(frozen=True)
class Retry:
    """One kind of work's retry policy: how many attempts, and the backoff between them."""

    max_attempts: int
    base_seconds: float
    max_seconds: float

    def after(self, attempts: int) -> timedelta:
        """How long an item waits after its `attempts`-th attempt failed."""
        return backoff(attempts, self.base_seconds, self.max_seconds)

    def last(self, attempts: int) -> bool:
        """Whether the `attempts`-th attempt was the last one (a failure now makes the item dead)."""
        return attempts >= self.max_attempts

    def spent(self, attempts: int) -> bool:
        """Whether a claim counted as attempt `attempts` is one too many (the last one already failed)."""
        return attempts > self.max_attempts


def claim(
    table: Any,
    key: Any,
    picked: Select[Any],
    *,
    values: dict[Any, Any],
    returning: Sequence[Any],
    lock: Any = None,
    key_share: bool = False,
    many: bool = False,
) -> Update:
    """The claim statement of one kind of work: lease the rows `picked` chooses (its due rows,
    ordered and limited) by writing `values` (holder, lease end, attempts + 1) and return `returning`.

    `lock` names what PostgreSQL locks with `SKIP LOCKED` (default: every table of `picked`), and
    `key_share` makes that lock `FOR NO KEY UPDATE`, which foreign-key checks do not wait for.
    Build it once and run it with bound parameters: composing it costs more than running it.
    """
    chosen = picked.with_for_update(skip_locked=True, of=lock, key_share=key_share).scalar_subquery()
    return (
        update(table)
        .where(key.in_(chosen) if many else key == chosen)
        .values(values)
        .returning(*returning)
        .execution_options(synchronize_session=False)
    )


def renewal(table: Any, key: Any, holder: Any, until: Any, *where: ColumnElement[bool]) -> Update:
    """The renewal statement: move the lease's end (bound `until`) of the named rows (bound, expanding
    `keys`) that `holder` (bound `holder`) still holds; returns the keys renewed."""
    return (
        update(table)
        .where(
            holder == bindparam("holder"),
            key.in_(bindparam("keys", type_=BigInteger(), expanding=True)),
            *where,
        )
        .values({until: bindparam("until", type_=UTCDateTime())})
        .returning(key)
        .execution_options(synchronize_session=False)
    )


def _given_up(error: Any, lease_until: Any, done_for: Any) -> Select[Any]:
    """How many people a kind of per-person work gave up on (an error, no lease, marked done)."""
    given_up = and_(error.is_not(None), lease_until.is_(None), done_for.is_not(None))
    return select(func.count()).select_from(FactConsolidation).where(given_up)


@dataclass(frozen=True)
class DeadItems:
    """Items given up on, per kind of work, and the newest dead updates: (when, why)."""

    counts: dict[str, int]
    newest_updates: list[tuple[datetime, str]]


async def dead_items(session: AsyncSession, *, last: int = 5) -> DeadItems:
    """How many items each kind of work gave up on: dead inbox updates, conversations post-processing
    gave up on, touchpoints cancelled after their last attempt, people whose tidying or graph work
    was given up (until their facts change again); and the newest `last` dead updates."""
    inbox_dead = InboxUpdate.outcome == "dead"
    row = FactConsolidation
    kinds: dict[str, Select[Any]] = {
        "updates": select(func.count()).select_from(InboxUpdate).where(inbox_dead),
        "post-processing": select(func.count())
        .select_from(Conversation)
        .where(Conversation.status == "failed"),
        "touchpoints": select(func.count())
        .select_from(Touchpoint)
        .where(Touchpoint.status == "cancelled", Touchpoint.outcome == "failed"),
        "tidying": _given_up(row.last_error, row.lease_until, row.consolidated_for),
        "graph": _given_up(row.graph_error, row.graph_lease_until, row.graphed_for),
    }
    counts = {kind: int(await session.scalar(stmt) or 0) for kind, stmt in kinds.items()}
    newest = (
        select(InboxUpdate.done_at, InboxUpdate.last_error)
        .where(inbox_dead)
        .order_by(InboxUpdate.done_at.desc(), InboxUpdate.id)
        .limit(last)
    )
    rows = (await session.execute(newest)).all()
    return DeadItems(counts, [(at, why or "no reason recorded") for at, why in rows if at is not None])
