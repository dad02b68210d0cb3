"""Whose facts changed since they were last tidied, or since the knowledge graph last followed
them, and the lease of the job doing that for one person (or group) (`fact_consolidations`); the
caller commits.

A person is due for a kind of work when what it follows changed after it last ran (its `changed`
column later than its `done_for`, which facts.py's `mark_changed` keeps strictly true after any
change: tidying follows the facts, the graph the facts, a final day's key moments and the persona's
thoughts) and no lease holds them (its `lease_until` unset or past: a claim's lease, or the wait before a
retry). Tidying also waits until none of their conversations is open or waiting for
post-processing (they are tidied while away, once their conversations are written). The claim is
the work queue's (db/work.py); the lease's end is the claim's token, so a worker whose lease was
taken over changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Update, bindparam, case, exists, or_, select, true, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db import work
from db.models import QUEUED, Conversation, FactConsolidation, UTCDateTime
from db.work import Retry

_ERROR_CHARS = 2000
# A conversation in one of these is still being had or written: its facts are not all in yet.
_BUSY = ("active", QUEUED, "processing")


@dataclass(frozen=True)
class PersonWork:
    """One kind of work done per person after their facts change: the names of its columns."""

    done_for: str
    lease_until: str
    attempts: str
    last_error: str
    done_at: str | None = None
    # Whether a person is due only once no conversation of theirs is open or being written.
    after_conversations: bool = False
    # The column that moves when what this work follows changes.
    changed: str = "changed_at"

    def col(self, name: str, table: Any = FactConsolidation) -> Any:
        """One of the kind's columns, of `table` (the model or an alias of it)."""
        return getattr(table, getattr(self, name))


TIDYING = PersonWork("consolidated_for", "lease_until", "attempts", "last_error", "consolidated_at", True)
GRAPH = PersonWork(
    "graphed_for", "graph_lease_until", "graph_attempts", "graph_error", changed="graph_changed_at"
)


@dataclass(frozen=True)
class Claim:
    """One person claimed: the facts' state it saw, and its lease (the claim's token)."""

    user_id: int
    seen: datetime
    lease_until: datetime
    attempts: int


def _claim_statement(kind: PersonWork) -> Update:
    """The one-statement claim (bound: now, lease_end, max_attempts), built once."""
    now = bindparam("now", type_=UTCDateTime())
    candidate = aliased(FactConsolidation, name="candidate")
    done_for, lease_until = kind.col("done_for", candidate), kind.col("lease_until", candidate)
    changed = kind.col("changed", candidate)
    busy = exists().where(Conversation.user_id == candidate.user_id, Conversation.status.in_(_BUSY))
    picked = (
        select(candidate.user_id)
        .where(
            or_(done_for.is_(None), changed > done_for),
            or_(lease_until.is_(None), lease_until <= now),
            ~busy if kind.after_conversations else true(),
        )
        .order_by(changed, candidate.user_id)
        .limit(1)
    )
    row, attempts = FactConsolidation, kind.col("attempts")
    values = {
        kind.col("lease_until"): bindparam("lease_end", type_=UTCDateTime()),
        # A person given up on starts over with the change that made them due again.
        attempts: case((attempts >= bindparam("max_attempts"), 1), else_=attempts + 1),
    }
    returning = [row.user_id, kind.col("changed"), kind.col("lease_until"), attempts]
    return work.claim(row, row.user_id, picked, values=values, returning=returning, lock=candidate)


_CLAIMS = {kind: _claim_statement(kind) for kind in (TIDYING, GRAPH)}


class ConsolidationRepository:
    """Claims, holds and releases people for one kind of work (tidying unless told)."""

    def __init__(self, session: AsyncSession, kind: PersonWork = TIDYING) -> None:
        self.session = session
        self.kind = kind

    async def claim(self, now: datetime, lease: timedelta, *, max_attempts: int) -> Claim | None:
        """Lease the due person whose facts changed first; None when none is due."""
        params = {"now": now, "lease_end": now + lease, "max_attempts": max_attempts}
        found = (await self.session.execute(_CLAIMS[self.kind], params)).one_or_none()
        if found is None:
            return None
        user_id, seen, lease_until, attempts = found
        return Claim(int(user_id), seen, lease_until, int(attempts))

    def _leased(self, claim: Claim) -> Update:
        # Every write after the claim: only while the lease is still this claim's.
        row = FactConsolidation
        return (
            update(row)
            .where(row.user_id == claim.user_id, self.kind.col("lease_until") == claim.lease_until)
            .execution_options(synchronize_session=False)
        )

    async def hold(self, claim: Claim) -> datetime | None:
        """Lock the person's row while the claim is still this worker's; its `changed` column, or None
        when the lease was taken over (or the person forgotten)."""
        lease = self.kind.col("lease_until")
        stmt = self._leased(claim).values({lease: lease}).returning(self.kind.col("changed"))
        changed_at: datetime | None = await self.session.scalar(stmt)
        return changed_at

    async def finish(self, claim: Claim, now: datetime, *, up_to: datetime | None) -> bool:
        """Record the person as tidied up to `up_to` (None: their facts as they now stand) and release
        them; False when the lease is no longer this claim's."""
        kind = self.kind
        values = {
            kind.done_for: kind.col("changed") if up_to is None else up_to,
            kind.attempts: 0,
            kind.lease_until: None,
            kind.last_error: None,
            **({kind.done_at: now} if kind.done_at is not None else {}),
        }
        stmt = self._leased(claim).values(**values)
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def release(self, claim: Claim) -> None:
        """Give the person back, still due and not counted as an attempt (the facts moved under the plan)."""
        kind = self.kind
        await self.session.execute(
            self._leased(claim).values(
                {kind.col("lease_until"): None, kind.col("attempts"): kind.col("attempts") - 1}
            )
        )

    async def fail(self, claim: Claim, error: str, now: datetime, *, retry: Retry) -> str | None:
        """Record a failed attempt: retried after its backoff, or given up after the last attempt
        (until the person's facts change again). "retry", "given_up", or None when the lease was
        taken over."""
        given_up = retry.last(claim.attempts)
        kind = self.kind
        values: dict[str, object] = {kind.last_error: error[:_ERROR_CHARS]}
        if given_up:
            values.update({kind.done_for: claim.seen, kind.lease_until: None})
        else:
            values[kind.lease_until] = now + retry.after(claim.attempts)
        result = await self.session.execute(self._leased(claim).values(**values))
        if not result.rowcount:  # type: ignore[attr-defined]
            return None
        return "given_up" if given_up else "retry"
