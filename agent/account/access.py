"""Who may use the bot: ACCESS (open | allowlist), ALLOWED_USERS, ADMIN_IDS and admins' rules.

Admins are always allowed. A /deny rule blocks in either mode; under `allowlist` a person also
needs ALLOWED_USERS or an /allow rule, by Telegram id or username. In a group chat the group
decides, by its (negative) chat id in the same list and rules: an allowed group is answered
whoever writes in it, except a person denied by name; a group not allowed is not answered at all,
however allowed its members are (an admin's message included: an admin /allow-s the group).
Rules live in the database, so every instance sees them: each process reads the whole (small)
table at most every `REFRESH` and answers from that copy in between, so a change made on one
instance holds on the others within `REFRESH` (5 seconds), and at once on the instance that made it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.access_keys import keys_of
from agent.core.clock import Clock
from agent.core.settings import Settings
from db.repositories.access import AccessRepository

REFRESH = timedelta(seconds=5)
# Bot-wide counters of a UTC day (daily_counts.name).
REFUSED = "refused_updates"
STRANGERS = "refused_strangers"

Rule = Literal["allow", "deny"]


@dataclass(frozen=True)
class AccessListing:
    """What /access shows."""

    mode: str
    admins: tuple[int, ...]
    allowed_by_setting: tuple[str, ...]
    rules: dict[str, str]


class AccessPolicy:
    """Decides whether a Telegram user may use the bot; admins change the rules at run time."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        *,
        mode: Literal["open", "allowlist"],
        allowed: Iterable[str],
        admins: Iterable[int],
        clock: Clock,
        refresh: timedelta = REFRESH,
    ) -> None:
        self.sessions = sessions
        self.mode = mode
        self.allowed = frozenset(allowed)
        self.admins = frozenset(admins)
        self.clock = clock
        self.refresh = refresh
        self._rules: dict[str, str] = {}
        self._loaded_at: datetime | None = None
        self._loading = asyncio.Lock()

    @classmethod
    def from_settings(
        cls, sessions: async_sessionmaker[AsyncSession], settings: Settings, clock: Clock
    ) -> AccessPolicy:
        """The policy the settings describe."""
        return cls(
            sessions,
            mode=settings.access,
            allowed=settings.allowed_users,
            admins=settings.admin_ids,
            clock=clock,
        )

    async def allows(self, telegram_id: int, username: str | None) -> bool:
        """Whether this Telegram user may use the bot now."""
        if telegram_id in self.admins:
            return True
        rules = await self._current_rules()
        keys = keys_of(telegram_id, username)
        ruled = {rules[key] for key in keys if key in rules}
        if "deny" in ruled:
            return False
        if self.mode == "open" or "allow" in ruled:
            return True
        return any(key in self.allowed for key in keys)

    async def allows_group(self, chat_id: int, telegram_id: int | None, username: str | None) -> bool:
        """Whether the bot may take part in this group chat now, for this speaker (None: no speaker)."""
        rules = await self._current_rules()
        group = str(chat_id)
        if rules.get(group) == "deny":
            return False
        if self.mode == "allowlist" and rules.get(group) != "allow" and group not in self.allowed:
            return False
        if telegram_id is None or telegram_id in self.admins:
            return True
        return not any(rules.get(key) == "deny" for key in keys_of(telegram_id, username))

    async def set_rule(self, key: str, rule: Rule, *, by: int | None) -> None:
        """Store an admin's /allow or /deny; this process follows it at once, others within REFRESH."""
        async with self.sessions() as session, session.begin():
            await AccessRepository(session).set_rule(key, rule, at=self.clock.now(), by=by)
        self._loaded_at = None

    async def listing(self) -> AccessListing:
        """The mode, the admins, ALLOWED_USERS and the stored rules."""
        self._loaded_at = None
        rules = await self._current_rules()
        return AccessListing(self.mode, tuple(sorted(self.admins)), tuple(sorted(self.allowed)), rules)

    async def _current_rules(self) -> dict[str, str]:
        if self._fresh():
            return self._rules
        async with self._loading:
            if not self._fresh():  # another update may have loaded them while this one waited
                async with self.sessions() as session:
                    self._rules = await AccessRepository(session).rules()
                self._loaded_at = self.clock.now()
        return self._rules

    def _fresh(self) -> bool:
        loaded = self._loaded_at
        return loaded is not None and self.clock.now() - loaded < self.refresh
