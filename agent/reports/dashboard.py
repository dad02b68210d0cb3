"""The admin dashboard's figures over days, from what the database keeps
(db/repositories/operations.py).

Per UTC day: people and groups who wrote, turns the model answered and their p95 time to an answer
(the daily roll-up `turn_days` for the days it holds, the context snapshots' `answered_ms` after),
the estimated cost as billed and had nothing been cached (the usage counters, priced like /stats:
agent/core/prices.py; the post-processing of imported conversations apart, with its calls and
tokens, and the imported conversations waiting for it), the share of input read from the prompt
cache, refusals by limit (the daily counters: token caps, rate limits, access), and the p95 lag
of post-processing, touchpoints and reminders; and what waits right now. Telegram-free: the web API
serves it as JSON.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import REFUSED, STRANGERS
from agent.account.ratelimit import RATE_COUNTER_PREFIX
from agent.core.prices import model_for, row_cost
from agent.core.settings import Settings
from agent.turn.daily_tokens import COUNTERS
from db.models.usage import IMPORT_USAGE
from db.repositories.import_queue import ImportQueueRepository
from db.repositories.operations import Backlog, OperationsRepository

MAX_DAYS = 90
# The bot-wide daily counters that are refusals, by the name the dashboard shows (the metric's
# `limit`); every rate limit's counter ("rate_<scope>_<window>") is one too, under its own name.
REFUSALS = {
    "user_daily_tokens": COUNTERS["user"],
    "group_daily_tokens": COUNTERS["group"],
    "daily_tokens": COUNTERS["bot"],
    "not_allowed": REFUSED,
    "strangers": STRANGERS,
}
LAG_JOBS = ("postprocess", "touchpoints", "reminders")


def percentile(values: Iterable[float], share: float = 0.95) -> float | None:
    """The nearest-rank percentile (None for no values)."""
    ordered = sorted(values)
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


async def dashboard(
    sessions: async_sessionmaker[AsyncSession], settings: Settings, now: datetime, *, days: int = 30
) -> dict[str, Any]:
    """Every chart's series over the last `days` UTC days (today included), and the backlog now."""
    days = max(1, min(days, MAX_DAYS))
    today = now.astimezone(UTC).date()
    first = today - timedelta(days=days - 1)
    since = datetime.combine(first, time(), tzinfo=UTC)
    labels = [(first + timedelta(days=i)).isoformat() for i in range(days)]
    async with sessions() as session:
        repo = OperationsRepository(session)
        active = await repo.active(since)
        rolled = await repo.rolled_turns(first)
        # The roll-up counts a day once; the snapshots of the days it does not hold yet are read.
        unrolled = max((day for day, _, _ in rolled), default=first - timedelta(days=1)) + timedelta(days=1)
        turns = await repo.turns(max(since, datetime.combine(unrolled, time(), tzinfo=UTC)))
        usage = await repo.usage(first)
        counts = await repo.daily_counts(first)
        lags = await repo.lags(since)
        backlog = await repo.backlog(now)
        waiting = await ImportQueueRepository(session).waiting_count()

    def series(values: dict[str, Any], empty: Any = 0) -> list[Any]:
        return [values.get(day, empty) for day in labels]

    people: dict[str, int] = {}
    groups: dict[str, int] = {}
    for day, kind, owners in active:
        (groups if kind == "group" else people)[day] = owners
    answered: dict[str, int] = defaultdict(int)
    times: dict[str, list[float]] = defaultdict(list)
    for day, ms in turns:
        answered[day] += 1
        if ms is not None:
            times[day].append(ms)
    p95_rolled: dict[str, float | None] = {}
    for rolled_day, count, p95_ms in rolled:
        answered[rolled_day.isoformat()] = count
        p95_rolled[rolled_day.isoformat()] = p95_ms
    billed: dict[str, Decimal] = defaultdict(Decimal)
    uncached: dict[str, Decimal] = defaultdict(Decimal)
    tokens_in: dict[str, int] = defaultdict(int)
    read: dict[str, int] = defaultdict(int)
    unpriced: set[str] = set()
    imports: dict[str, dict[str, Any]] = {"calls": defaultdict(int), "tokens": defaultdict(int)}
    imported: dict[str, Decimal] = defaultdict(Decimal)
    for row in usage:
        day = str(row.day)
        if row.kind == IMPORT_USAGE:
            imports["calls"][day] += row.calls
            imports["tokens"][day] += row.input_tokens + row.output_tokens
        else:
            tokens_in[day] += row.input_tokens
            read[day] += row.cache_read_tokens
        model = model_for(row.kind, settings)
        cost = row_cost(model, row)
        if cost is None:
            unpriced.add(model)
            continue
        if row.kind == IMPORT_USAGE:
            imported[day] += cost.billed
            continue
        billed[day] += cost.billed
        uncached[day] += cost.uncached
    refused: dict[str, dict[str, int]] = {name: {} for name in REFUSALS}
    counter_names = {counter: name for name, counter in REFUSALS.items()}
    for counted_day, counter, count in counts:
        name = counter_names.get(counter)
        if name is None and counter.startswith(RATE_COUNTER_PREFIX):
            name = counter
        if name is not None:
            refused.setdefault(name, {})[counted_day.isoformat()] = count
    lag_values: dict[str, dict[str, list[float]]] = {job: defaultdict(list) for job in LAG_JOBS}
    for lag in lags:
        lag_values[lag.job][lag.day.isoformat()].append(lag.seconds)
    return {
        "generated_at": now.astimezone(UTC).isoformat(timespec="seconds"),
        "days": labels,
        "active": {"people": series(people), "groups": series(groups)},
        "turns": series(answered),
        "p95_turn_ms": [
            _rounded(p95_rolled[day] if day in p95_rolled else percentile(times[day])) for day in labels
        ],
        "cost": {
            "billed": [_dollars(billed.get(day)) for day in labels],
            "uncached": [_dollars(uncached.get(day)) for day in labels],
            "unpriced_models": sorted(unpriced),
        },
        # The post-processing of imported conversations, apart from the cost above.
        "imports": {
            "calls": series(imports["calls"]),
            "tokens": series(imports["tokens"]),
            "billed": [_dollars(imported.get(day)) for day in labels],
        },
        "cache_read_share": [
            round(read[day] / tokens_in[day], 4) if tokens_in.get(day) else None for day in labels
        ],
        "refusals": {name: series(values) for name, values in refused.items()},
        "p95_job_lag_seconds": {
            job: [_rounded(percentile(values[day])) if day in values else None for day in labels]
            for job, values in lag_values.items()
        },
        "now": {**_now(backlog, now), "imports_waiting": waiting},
    }


def _now(backlog: Backlog, now: datetime) -> dict[str, Any]:
    oldest = backlog.oldest_waiting
    return {
        "inbox": backlog.inbox,
        "oldest_wait_seconds": round((now - oldest).total_seconds(), 1) if oldest else 0.0,
        "job_lag_seconds": {
            job: round(max((now - since).total_seconds(), 0.0), 1) for job, since in backlog.due_since.items()
        },
    }


def _dollars(value: Decimal | None) -> float:
    return round(float(value), 6) if value is not None else 0.0


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
