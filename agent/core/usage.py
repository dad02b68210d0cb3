"""Model calls and tokens spent, metered per piece of work (cost in view).

A `UsageMeter` is opened around one piece of work (a turn, a conversation's post-processing); every
model call inside it, however deep (PydanticAI runs, graphiti's LLM client), adds to it through a
context variable, and the code that opened it stores the totals with `db.usage.UsageRepository`.
Calls outside a meter are not counted anywhere (benchmarks and tests open their own).

Input tokens include the prompt-cache reads and writes, as PydanticAI counts them; the cache counts
say how many of them the provider read from or wrote to its cache (1-hour writes are part of the
writes), so the cost can be priced as billed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import asdict, dataclass, field
from datetime import date
from typing import Literal

from pydantic_ai.usage import RunUsage
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core import observability
from db.repositories.usage import UsageRepository
from db.repositories.users import user_present

UsageKind = Literal[
    "chat",
    "onboarding",
    "compaction",
    "extraction",
    "consolidation",
    "day_summary",
    "graph",
    "briefing",
    "embedding",
    "proactive",
    # Post-processing of conversations imported from another assistant (jobs/imports.py): apart.
    "import",
]


@dataclass
class Spend:
    """Calls and tokens of one kind of use."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cache_write_1h_tokens: int = 0

    def add(self, other: Spend) -> None:
        """Count another spend's calls and tokens in."""
        for name, value in asdict(other).items():
            setattr(self, name, getattr(self, name) + value)


@dataclass
class UsageMeter:
    """Spend per kind of use inside one piece of work."""

    kinds: dict[UsageKind, Spend] = field(default_factory=dict)

    def add(self, kind: UsageKind, spend: Spend) -> None:
        """Count calls and tokens of one kind."""
        self.kinds.setdefault(kind, Spend()).add(spend)

    def total(self) -> Spend:
        """Every kind together."""
        spend = Spend()
        for item in self.kinds.values():
            spend.add(item)
        return spend


_current: ContextVar[UsageMeter | None] = ContextVar("nikita_usage_meter", default=None)


@contextlib.contextmanager
def metering(meter: UsageMeter | None = None) -> Iterator[UsageMeter]:
    """Count every model call made inside the block (tasks started inside inherit the meter)."""
    meter = meter if meter is not None else UsageMeter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)


def record_call(
    kind: UsageKind,
    *,
    calls: int = 1,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
) -> None:
    """Count one model call (or several) on the current meter, if any (cache counts within input), and
    in the metrics (every call, metered or not)."""
    spend = Spend(
        calls, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cache_write_1h_tokens
    )
    observability.model_use(kind, **asdict(spend))
    if (meter := _current.get()) is not None:
        meter.add(kind, spend)


def record_run(kind: UsageKind, usage: RunUsage) -> None:
    """Count a PydanticAI run's requests and tokens on the current meter, if any."""
    record_call(
        kind,
        calls=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cache_write_1h_tokens=usage.cache_write_1h_tokens,
    )


async def store_usage(session: AsyncSession, user_id: int, day: date, meter: UsageMeter) -> None:
    """Add the meter's counts to the user's counters of `day` (in the caller's transaction).

    Call it as the transaction's last write: a usage row also adds to the day's bot-wide token
    counter, one row every writer shares and holds until its commit (db/ddl/usage.py), so a
    transaction holding it must wait for nothing else. The caller's pending changes are flushed
    first for the same reason.
    """
    if not meter.kinds:
        return
    await session.flush()
    usage = UsageRepository(session)
    for kind, spend in meter.kinds.items():
        await usage.add(user_id, day, kind, **asdict(spend))


async def store_usage_apart(
    sessions: async_sessionmaker[AsyncSession], user_id: int, day: date, meter: UsageMeter
) -> None:
    """Store the meter in a transaction of its own, unless it is empty or the user was forgotten."""
    if not meter.kinds:
        return
    async with sessions() as session, session.begin():
        if await user_present(session, user_id):
            await store_usage(session, user_id, day, meter)
