"""The bot's metrics: what they are, and the functions that record them (no-ops while metrics are off).

| metric | kind | attributes |
| --- | --- | --- |
| `nikita.turns` | counter | `surface` (chat, group, heard...), `outcome` (answered, failed, refused, ...) |
| `nikita.turn.duration` | histogram, s | the same |
| `nikita.model.calls` | counter | `kind` (chat, compaction, extraction...: agent/core/usage.py) |
| `nikita.model.tokens` | counter | `kind`, `type`: input (uncached), cache_read, cache_write, output |
| `nikita.model.cost` | counter, USD | `kind`, `pricing`: billed, uncached (had nothing been cached) |
| `nikita.refusals` | counter | `limit`: user_daily_tokens, group_daily_tokens, daily_tokens, rate_* |
| `nikita.jobs.runs` / `nikita.job.duration` | counter / histogram, s | `job`, `result` (ok, failed) |
| `nikita.reminders.sent`, `nikita.follow_ups.sent` | counter | |
| `nikita.errors` | counter | `event` (the log line's message), `level`, `error.type` |
| `nikita.facts.dropped` | counter | `writer` (extraction, tool), `reason` (why not the person's) |
| `nikita.inbox.depth` | gauge | `status`: pending, replying |
| `nikita.inbox.oldest_wait` | gauge, s | the oldest update still waiting for its answer |
| `nikita.job.lag` | gauge, s | `job`: postprocess, touchpoints, day-summaries (the oldest due work's wait) |
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agent.core.observability.state import current

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter

# Seconds: a turn or a job between a few milliseconds and a couple of minutes.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
# Usage limits' names as the settings spell them, by the turn frame's name of the cap.
CAP_LIMITS = {"user": "user_daily_tokens", "group": "group_daily_tokens", "bot": "daily_tokens"}


@dataclass(frozen=True)
class Instruments:
    """Every synchronous instrument (the gauges are observed by the sampler)."""

    turns: Counter
    turn_duration: Histogram
    model_calls: Counter
    tokens: Counter
    cost: Counter
    refusals: Counter
    job_runs: Counter
    job_duration: Histogram
    reminders_sent: Counter
    follow_ups_sent: Counter
    errors: Counter
    facts_dropped: Counter

    @classmethod
    def create(cls, meter: Meter) -> Instruments:
        """The instruments on `meter`."""
        return cls(
            turns=meter.create_counter("nikita.turns", unit="{turn}", description="Turns run"),
            turn_duration=meter.create_histogram(
                "nikita.turn.duration",
                unit="s",
                description="A turn from its start to its answer stored",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            model_calls=meter.create_counter("nikita.model.calls", unit="{call}", description="Model calls"),
            tokens=meter.create_counter("nikita.model.tokens", unit="{token}", description="Model tokens"),
            cost=meter.create_counter(
                "nikita.model.cost", unit="USD", description="Estimated model cost (genai-prices)"
            ),
            refusals=meter.create_counter(
                "nikita.refusals", unit="{refusal}", description="Requests refused"
            ),
            job_runs=meter.create_counter("nikita.jobs.runs", unit="{run}", description="Job runs"),
            job_duration=meter.create_histogram(
                "nikita.job.duration",
                unit="s",
                description="One run of a job",
                explicit_bucket_boundaries_advisory=DURATION_BUCKETS,
            ),
            reminders_sent=meter.create_counter(
                "nikita.reminders.sent", unit="{message}", description="Reminders sent"
            ),
            follow_ups_sent=meter.create_counter(
                "nikita.follow_ups.sent", unit="{message}", description="Follow-ups and check-ins sent"
            ),
            errors=meter.create_counter(
                "nikita.errors", unit="{event}", description="Warnings and errors logged, by event"
            ),
            facts_dropped=meter.create_counter(
                "nikita.facts.dropped",
                unit="{fact}",
                description="Facts not stored: they did not stand on the person's own words",
            ),
        )


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
    """Count a reminder or a follow-up Telegram accepted whole."""
    if (instruments := current.instruments) is not None:
        (instruments.reminders_sent if reminder else instruments.follow_ups_sent).add(1)


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
