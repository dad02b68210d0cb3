"""Daily token caps: USER_DAILY_TOKENS per user, GROUP_DAILY_TOKENS per group chat and
DAILY_TOKENS for everyone (0 = no cap). A group's turns are metered on the group's own owner row,
so its members' private caps and the group's never mix.

A day is a UTC day, the day `model_usage` counts in. The check runs before a turn's (or an
onboarding answer's) model call and reads what is already metered: every kind of call of that
day, post-processing included. The turn that crosses a cap finishes; the next one is refused.
A refused message is still stored, with CAP_REPLY as its answer and no model call.

The check is one statement: everyone's tokens of the day are one `daily_counts` row that triggers on
`model_usage` keep in every writer's transaction (db/ddl/usage.py), so it costs the same whatever
the number of users, and it is exact across processes because the database keeps it. A turn reads
it in the transaction that stores the user's message (the turn frame, agent/turn/frame.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from db.repositories.access import AccessRepository
from db.repositories.usage import UsageRepository

CAP_REPLY = "I've reached my limit for today — let's pick this up tomorrow."

Over = Literal["user", "group", "bot"]
# Bot-wide counters of a UTC day (daily_counts.name), one per cap.
COUNTERS: dict[Over, str] = {"user": "budget_user", "group": "budget_group", "bot": "budget_bot"}


@dataclass(frozen=True)
class DailyCaps:
    """The three daily caps."""

    per_user: int = 0
    bot_wide: int = 0
    per_group: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> DailyCaps:
        """The caps the settings describe."""
        return cls(
            per_user=settings.user_daily_tokens,
            bot_wide=settings.daily_tokens,
            per_group=settings.group_daily_tokens,
        )

    @property
    def enabled(self) -> bool:
        """Whether any cap is set (no cap: nothing to read before a turn)."""
        return self.per_user > 0 or self.bot_wide > 0 or self.per_group > 0

    async def over(
        self, sessions: async_sessionmaker[AsyncSession], user_id: int, at: datetime
    ) -> Over | None:
        """Which cap the user's UTC day of `at` has reached ("bot" first), or None to go on."""
        if not self.enabled:
            return None
        async with sessions() as session:
            return await self.check(session, user_id, at)

    async def check(self, session: AsyncSession, user_id: int, at: datetime) -> Over | None:
        """`over` in the caller's session: one statement, the day's bot-wide counter row and the
        owner's rows of the day (the primary key) and the owner's kind, whatever the number of users."""
        if not self.enabled:
            return None
        day = at.astimezone(UTC).date()
        everyone, owners, group = await UsageRepository(session).spent_by_owner(day, user_id)
        if self.bot_wide > 0 and everyone >= self.bot_wide:
            return "bot"
        cap = self.per_group if group else self.per_user
        if cap > 0 and owners >= cap:
            return "group" if group else "user"
        return None


async def count_refusal(session: AsyncSession, over: Over, at: datetime) -> None:
    """Count a refusal in the day's bot-wide counters, in the transaction that stores its answer."""
    await AccessRepository(session).bump(at.astimezone(UTC).date(), COUNTERS[over])
