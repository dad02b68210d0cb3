"""The `access_rules` and `daily_counts` statements; the caller owns the transaction."""

from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import AccessRule, DailyCount


class AccessRepository:
    """Reads and writes admins' access rules and the bot-wide daily counters; never commits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session
        self._insert = postgresql.insert if session.get_bind().dialect.name == "postgresql" else sqlite.insert

    async def rules(self) -> dict[str, str]:
        """Every rule: key ("123" or "alice") -> "allow" | "deny"."""
        rows = await self.session.execute(select(AccessRule.key, AccessRule.rule))
        return {key: rule for key, rule in rows}

    async def set_rule(self, key: str, rule: str, *, at: datetime, by: int | None) -> None:
        """Allow or deny `key` from now on (replacing its earlier rule)."""
        stmt = self._insert(AccessRule).values(key=key, rule=rule, changed_at=at, changed_by=by)
        stmt = stmt.on_conflict_do_update(
            index_elements=["key"],
            set_={"rule": stmt.excluded.rule, "changed_at": at, "changed_by": by},
        )
        await self.session.execute(stmt)

    async def bump(self, day: date, name: str, by: int = 1) -> None:
        """Add `by` to the counter `name` of `day` (created when missing)."""
        stmt = self._insert(DailyCount).values(day=day, name=name, count=by)
        stmt = stmt.on_conflict_do_update(
            index_elements=["day", "name"], set_={"count": DailyCount.count + stmt.excluded.count}
        )
        await self.session.execute(stmt)

    async def counts(self, day: date) -> dict[str, int]:
        """Every counter of `day` by name."""
        rows = await self.session.execute(
            select(DailyCount.name, DailyCount.count).where(DailyCount.day == day)
        )
        return {name: int(count) for name, count in rows}
