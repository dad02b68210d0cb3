"""The changes consolidation makes to one owner's facts: merging duplicates, placing a fact in its
profile section or giving a plan its date; the caller commits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

from sqlalchemy import select

from db.models import UserFact
from db.repositories.facts import HELD, FactRepository, mark_changed


class FactTidying(FactRepository):
    """`FactRepository` with the consolidation job's own changes."""

    async def absorb(self, owner_id: int, merges: Mapping[int, Iterable[int]], at: datetime) -> int:
        """Merge facts that say the same thing into the held one kept for them (`merges`: kept id
        -> the others), superseded by it; how many were merged.

        Their sources and the times they were said join it, and so do their pin, "don't bring this
        up" and a category it lacks: what the person asked of any of them holds for the one kept.
        Only the owner's held facts take part; the rows are written in one flush.
        """
        wanted = {int(i) for keep, others in merges.items() for i in (keep, *others)}
        if not wanted:
            return 0
        stmt = select(UserFact).where(UserFact.user_id == owner_id, UserFact.id.in_(sorted(wanted)), HELD)
        rows = {f.id: f for f in (await self.session.execute(stmt)).scalars()}
        merged = 0
        for keep_id, other_ids in merges.items():
            keep = rows.get(keep_id)
            others = [rows[i] for i in sorted({int(i) for i in other_ids} - {keep_id}) if i in rows]
            if keep is None or not others:
                continue
            every = (keep, *others)
            keep.message_ids = sorted({int(i) for f in every for i in f.message_ids or []})
            keep.reinforced = sum(f.reinforced for f in every)
            keep.last_seen_at = max(f.last_seen_at or f.created_at for f in every)
            keep.pinned = any(f.pinned for f in every)
            keep.hidden = any(f.hidden for f in every)
            keep.category = keep.category or next((f.category for f in others if f.category), None)
            keep.updated_at = at
            for fact in others:
                fact.invalidated_at, fact.invalid_reason, fact.superseded_by = (
                    at,
                    "said again in other words",
                    keep.id,
                )
                fact.updated_at = at
                del rows[fact.id]  # merged once
            merged += len(others)
        if merged:
            await mark_changed(self.session, owner_id, at)  # its statement flushes the rows first
        return merged

    async def place(
        self, owner_id: int, fact_id: int, at: datetime, *, category: str | None, valid_until: datetime | None
    ) -> UserFact | None:
        """Give a held fact its profile section and, for a plan, its date (None leaves each as it is);
        the fact, or None when the owner holds no such fact or it already reads so."""
        fact = await self.held_one(owner_id, fact_id)
        if fact is None or (category in (None, fact.category) and valid_until in (None, fact.valid_until)):
            return None
        if category is not None:
            fact.category = category
        if valid_until is not None:
            fact.valid_until = valid_until
        fact.updated_at = at
        await mark_changed(self.session, owner_id, at)
        return fact
