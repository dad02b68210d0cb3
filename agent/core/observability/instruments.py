"""The functions that record the bot's metrics (`catalog.py` lists them); no-ops while metrics are off."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from agent.core.observability.state import current

# Usage limits' names as the settings spell them, by the turn frame's name of the cap.
CAP_LIMITS = {"user": "user_daily_tokens", "group": "group_daily_tokens", "bot": "daily_tokens"}


def turn_done(surface: str, outcome: str, seconds: float) -> None:
    """Count a turn and its duration."""
    if (instruments := current.instruments) is None:
        return
    attributes = {"surface": surface, "outcome": outcome}
    instruments.turns.add(1, attributes)
    instruments.turn_duration.record(seconds, attributes)


def model_use(
    kind: str,
    *,
    calls: int,
    input_tokens: int,
    output_tokens: int,
    cache_read_tokens: int,
    cache_write_tokens: int,
    cache_write_1h_tokens: int,
) -> None:
    """Count model calls, their tokens by type, and their estimated cost with and without the cache."""
    if (instruments := current.instruments) is None:
        return
    instruments.model_calls.add(calls, {"kind": kind})
    fresh = max(input_tokens - cache_read_tokens - cache_write_tokens, 0)
    for kind_of_token, count in (
        ("input", fresh),
        ("cache_read", cache_read_tokens),
        ("cache_write", cache_write_tokens),
        ("output", output_tokens),
    ):
        if count:
            instruments.tokens.add(count, {"kind": kind, "type": kind_of_token})
    if current.model_for is None:
        return
    from agent.core.prices import estimate_cost

    cost = estimate_cost(
        current.model_for(kind),
        input_tokens,
        output_tokens,
        cache_read_tokens=cache_read_tokens,
        cache_write_tokens=cache_write_tokens,
        cache_write_1h_tokens=cache_write_1h_tokens,
    )
    if cost is not None:
        instruments.cost.add(float(cost.billed), {"kind": kind, "pricing": "billed"})
        instruments.cost.add(float(cost.uncached), {"kind": kind, "pricing": "uncached"})


def refused(limit: str) -> None:
    """Count a request refused by a limit (a daily token cap, a rate limit)."""
    if (instruments := current.instruments) is not None:
        instruments.refusals.add(1, {"limit": limit})


def job_done(job: str, seconds: float, *, failed: bool) -> None:
    """Count a job's run and its duration."""
    if (instruments := current.instruments) is None:
        return
    instruments.job_runs.add(1, {"job": job, "result": "failed" if failed else "ok"})
    instruments.job_duration.record(seconds, {"job": job})


def touchpoint_sent(*, reminder: bool) -> None:
    """Count a reminder or a touchpoint (a follow-up or a check-in) Telegram accepted whole."""
    if (instruments := current.instruments) is not None:
        (instruments.reminders_sent if reminder else instruments.touchpoints_sent).add(1)


def facts_dropped(writer: str, reason: str, count: int = 1) -> None:
    """Count facts not stored because they did not stand on the person's own words."""
    if (instruments := current.instruments) is not None:
        instruments.facts_dropped.add(count, {"writer": writer, "reason": reason})


class ErrorCounter(logging.Handler):
    """Counts every warning and error logged, by its event (the message, which the code keeps
    constant: the details go in `extra=`), so errors by kind need no call of their own."""

    def __init__(self) -> None:
        super().__init__(level=logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        """Count the record."""
        if (instruments := current.instruments) is None:
            return
        attributes: Mapping[str, str] = {"event": str(record.msg)[:120], "level": record.levelname}
        if record.exc_info and record.exc_info[1] is not None:
            attributes = {**attributes, "error.type": type(record.exc_info[1]).__name__}
        instruments.errors.add(1, attributes)
