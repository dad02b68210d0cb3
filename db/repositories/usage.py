"""Model usage per user, day and kind: counters added to in the caller's transaction."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any, cast

from sqlalchemy import BindParameter, Insert, ScalarSelect, Select, Table, bindparam, func, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.ddl.usage import TOKENS
from db.models import DailyCount, ModelUsage, User
from db.models.usage import IMPORT_USAGE

# The counters of a row, in UsageRow's order.
COUNTS = (
    "calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cache_write_1h_tokens",
)


@dataclass(frozen=True)
class UsageRow:
    """Calls and tokens of one day and kind (or a total over several); input includes the cached."""

    day: date | None
    kind: str
    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0


@functools.cache
def _add(dialect: str) -> Insert:
    # Built once per dialect, as a Core statement: every turn stores its usage through it.
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    table = cast(Table, ModelUsage.__table__)
    stmt = insert(table).values({name: bindparam(name) for name in ("user_id", "day", "kind", *COUNTS)})
    return stmt.on_conflict_do_update(
        index_elements=["user_id", "day", "kind"],
        set_={name: table.c[name] + stmt.excluded[name] for name in COUNTS},
    )


@functools.cache
def _spent_by_owner() -> Select[int, int, str]:
    # Built once: every turn that calls the model reads its budgets through it.
    everyone, owners = UsageRepository._spent(bindparam("day"), bindparam("user_id"))
    kind = select(User.kind).where(User.id == bindparam("user_id")).scalar_subquery()
    return select(func.coalesce(everyone, 0), owners, kind)


class UsageRepository:
    """Adds to and reads the `model_usage` counters; never commits."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        user_id: int,
        day: date,
        kind: str,
        *,
        calls: int,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
        cache_write_1h_tokens: int = 0,
    ) -> None:
        """Add calls and tokens to the user's counter of that day and kind (created when missing)."""
        if calls == 0 and input_tokens == 0 and output_tokens == 0:
            return
        counts = (
            calls,
            input_tokens,
            output_tokens,
            cache_read_tokens,
            cache_write_tokens,
            cache_write_1h_tokens,
        )
        params = {"user_id": user_id, "day": day, "kind": kind, **dict(zip(COUNTS, counts, strict=True))}
        await self.session.execute(_add(self.session.get_bind().dialect.name), params)

    async def for_user(self, user_id: int, *, since: date) -> list[UsageRow]:
        """The user's counters from `since` on, newest day first, kinds in name order."""
        rows = await self.session.execute(
            select(ModelUsage)
            .where(ModelUsage.user_id == user_id, ModelUsage.day >= since)
            .order_by(ModelUsage.day.desc(), ModelUsage.kind)
        )
        return [UsageRow(u.day, u.kind, *(getattr(u, name) for name in COUNTS)) for u in rows.scalars()]

    async def totals_by_kind(self, *, since: date) -> list[UsageRow]:
        """Every user's counters from `since` on, summed per kind."""
        rows = await self.session.execute(
            select(ModelUsage.kind, *(func.sum(getattr(ModelUsage, name)) for name in COUNTS))
            .where(ModelUsage.day >= since)
            .group_by(ModelUsage.kind)
            .order_by(ModelUsage.kind)
        )
        return [UsageRow(None, kind, *(int(n or 0) for n in counts)) for kind, *counts in rows]

    async def import_spent(self, day: date, user_ids: Sequence[int]) -> dict[int, int]:
        """Tokens each of these people spent on post-processing their imports on `day`."""
        if not user_ids:
            return {}
        stmt = (
            select(ModelUsage.user_id, func.sum(ModelUsage.input_tokens + ModelUsage.output_tokens))
            .where(ModelUsage.day == day, ModelUsage.kind == IMPORT_USAGE, ModelUsage.user_id.in_(user_ids))
            .group_by(ModelUsage.user_id)
        )
        return {int(user): int(tokens or 0) for user, tokens in await self.session.execute(stmt)}

    async def spent_by_owner(self, day: date, user_id: int) -> tuple[int, int, bool]:
        """`spent` and whether the owner is a group chat (whose caps differ), in the same one statement."""
        row = (await self.session.execute(_spent_by_owner(), {"day": day, "user_id": user_id})).one()
        return int(row[0] or 0), int(row[1] or 0), row[2] == "group"

    async def spent(self, day: date, user_id: int | None = None) -> tuple[int, int]:
        """Tokens of `day` in one statement: everyone's (one row, the day's counter that triggers
        keep, db/ddl/usage.py) and the user's (their rows of the day, one per kind, but an import's:
        the person's cap for chat leaves it out); 0 for no user."""
        everyone, users = self._spent(day, user_id)
        row = (await self.session.execute(select(func.coalesce(everyone, 0), users))).one()
        return int(row[0] or 0), int(row[1] or 0)

    @staticmethod
    def _spent(
        day: date | BindParameter[Any], user_id: int | BindParameter[Any] | None
    ) -> tuple[ScalarSelect[int], ScalarSelect[int]]:
        everyone = (
            select(DailyCount.count).where(DailyCount.day == day, DailyCount.name == TOKENS).scalar_subquery()
        )
        users = (
            select(func.coalesce(func.sum(ModelUsage.input_tokens + ModelUsage.output_tokens), 0))
            .where(
                ModelUsage.day == day,
                ModelUsage.user_id == (user_id if user_id is not None else -1),
                # An import's post-processing has a cap of its own (IMPORT_DAILY_TOKENS).
                ModelUsage.kind != IMPORT_USAGE,
            )
            .scalar_subquery()
        )
        return everyone, users
