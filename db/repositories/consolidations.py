"""Whose facts changed since they were last tidied, and the lease of the job tidying one person (or
group) (`fact_consolidations`); the caller commits.

A person is due when their facts changed after the last consolidation (`changed_at` later than
`consolidated_for`, which `FactRepository.mark_changed` keeps strictly true after any change), no
lease holds them (`lease_until` unset or past: a claim's lease, or the wait before a retry) and none
of their conversations is open or waiting for post-processing (they are tidied while away, once
their conversations are written). The claim is the work queue's (db/work.py); the lease's end is
the claim's token, so a worker whose lease was taken over changes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Update, bindparam, case, exists, or_, select, update
from sqlalchemy.orm import aliased

from db import work
from db.models import QUEUED, Conversation, FactConsolidation, UTCDateTime
from db.repositories.base import Repository
from db.work import Retry

_ERROR_CHARS = 2000
# A conversation in one of these is still being had or written: its facts are not all in yet.
_BUSY = ("active", QUEUED, "processing")


@dataclass(frozen=True)
class Claim:
    """One person claimed for tidying: the facts' state it saw, and its lease (the claim's token)."""

    user_id: int
    seen: datetime
    lease_until: datetime
    attempts: int


def _claim_statement() -> Update:
    """The one-statement claim (bound: now, lease_until, max_attempts), built once."""
    now = bindparam("now", type_=UTCDateTime())
    candidate = aliased(FactConsolidation, name="candidate")
    busy = exists().where(Conversation.user_id == candidate.user_id, Conversation.status.in_(_BUSY))
    picked = (
        select(candidate.user_id)
        .where(
            or_(candidate.consolidated_for.is_(None), candidate.changed_at > candidate.consolidated_for),
            or_(candidate.lease_until.is_(None), candidate.lease_until <= now),
            ~busy,
        )
        .order_by(candidate.changed_at, candidate.user_id)
        .limit(1)
    )
    row = FactConsolidation
    values = {
        row.lease_until: bindparam("lease_until", type_=UTCDateTime()),
        # A person given up on starts over with the change that made them due again.
        row.attempts: case((row.attempts >= bindparam("max_attempts"), 1), else_=row.attempts + 1),
    }
    returning = [row.user_id, row.changed_at, row.lease_until, row.attempts]
    return work.claim(row, row.user_id, picked, values=values, returning=returning, lock=candidate)


_CLAIM = _claim_statement()


class ConsolidationRepository(Repository):
    """Claims, holds and releases people for the consolidation job."""

    async def claim(self, now: datetime, lease: timedelta, *, max_attempts: int) -> Claim | None:
        """Lease the due person whose facts changed first; None when none is due."""
        params = {"now": now, "lease_until": now + lease, "max_attempts": max_attempts}
        found = (await self.session.execute(_CLAIM, params)).one_or_none()
        if found is None:
            return None
        user_id, seen, lease_until, attempts = found
        return Claim(int(user_id), seen, lease_until, int(attempts))

    def _leased(self, claim: Claim) -> Update:
        # Every write after the claim: only while the lease is still this claim's.
        row = FactConsolidation
        return (
            update(row)
            .where(row.user_id == claim.user_id, row.lease_until == claim.lease_until)
            .execution_options(synchronize_session=False)
        )

    async def hold(self, claim: Claim) -> datetime | None:
        """Lock the person's row while the claim is still this worker's; its `changed_at`, or None
        when the lease was taken over (or the person forgotten)."""
        row = FactConsolidation
        stmt = self._leased(claim).values(lease_until=row.lease_until).returning(row.changed_at)
        changed_at: datetime | None = await self.session.scalar(stmt)
        return changed_at

    async def finish(self, claim: Claim, now: datetime, *, up_to: datetime | None) -> bool:
        """Record the person as tidied up to `up_to` (None: their facts as they now stand) and release
        them; False when the lease is no longer this claim's."""
        stmt = self._leased(claim).values(
            consolidated_for=FactConsolidation.changed_at if up_to is None else up_to,
            consolidated_at=now,
            attempts=0,
            lease_until=None,
            last_error=None,
        )
        return bool((await self.session.execute(stmt)).rowcount)  # type: ignore[attr-defined]

    async def release(self, claim: Claim) -> None:
        """Give the person back, still due and not counted as an attempt (the facts moved under the plan)."""
        await self.session.execute(
            self._leased(claim).values(lease_until=None, attempts=FactConsolidation.attempts - 1)
        )

    async def fail(self, claim: Claim, error: str, now: datetime, *, retry: Retry) -> str | None:
        """Record a failed attempt: retried after its backoff, or given up after the last attempt
        (until the person's facts change again). "retry", "given_up", or None when the lease was
        taken over."""
        given_up = retry.last(claim.attempts)
        values: dict[str, object] = {"last_error": error[:_ERROR_CHARS]}
        if given_up:
            values.update(consolidated_for=claim.seen, lease_until=None)
        else:
            values.update(lease_until=now + retry.after(claim.attempts))
        result = await self.session.execute(self._leased(claim).values(**values))
        if not result.rowcount:  # type: ignore[attr-defined]
            return None
        return "given_up" if given_up else "retry"
