"""Daily token budgets: USER_DAILY_TOKENS per user and DAILY_TOKENS for everyone (0 = no cap).

A day is a UTC day, the day `model_usage` counts in. The check runs before a turn's (or an
onboarding answer's) model call and reads what is already metered: every kind of call of that
day, post-processing included. The turn that crosses a cap finishes; the next one is refused.
A refused message is still stored, with BUDGET_REPLY as its answer and no model call.

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
from agent.turn.transcript import TurnReceipt
from db.repositories.access import AccessRepository
from db.repositories.usage import UsageRepository

BUDGET_REPLY = "I've reached my limit for today — let's pick this up tomorrow."

Over = Literal["user", "bot"]
# Bot-wide counters of a UTC day (daily_counts.name), one per cap.
COUNTERS: dict[Over, str] = {"user": "budget_user", "bot": "budget_bot"}


@dataclass(frozen=True)
class TokenBudget:
    """The two daily caps."""

    per_user: int = 0
    bot_wide: int = 0

    @classmethod
    def from_settings(cls, settings: Settings) -> TokenBudget:
        """The caps the settings describe."""
        return cls(per_user=settings.user_daily_tokens, bot_wide=settings.daily_tokens)

    @property
    def enabled(self) -> bool:
        """Whether any cap is set (no cap: nothing to read before a turn)."""
        return self.per_user > 0 or self.bot_wide > 0

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
        user's rows of the day (the primary key), whatever the number of users."""
        if not self.enabled:
            return None
        everyone, users = await UsageRepository(session).spent(at.astimezone(UTC).date(), user_id)
        if self.bot_wide > 0 and everyone >= self.bot_wide:
            return "bot"
        if self.per_user > 0 and users >= self.per_user:
            return "user"
        return None


def counting(receipt: TurnReceipt | None, over: Over, at: datetime) -> TurnReceipt:
    """A turn receipt that also counts the refusal in the day's bot-wide counters, in the same
    transaction as the stored answer."""

    async def counted(session: AsyncSession, answer: str) -> None:
        await AccessRepository(session).bump(at.astimezone(UTC).date(), COUNTERS[over])
        if receipt is not None:
            await receipt(session, answer)

    return counted
