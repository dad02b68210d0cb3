"""The bot's metrics: what they are (`instruments.py` records them, `sampler.py` observes the gauges).

| metric | kind | attributes |
| --- | --- | --- |
| `nikita.turns` | counter | `surface` (chat, group, heard...), `outcome` (answered, failed, refused, ...) |
| `nikita.turn.duration` | histogram, s | the same |
| `nikita.model.calls` | counter | `kind` (chat, compaction, extraction...: agent/core/usage.py) |
| `nikita.model.tokens` | counter | `kind`, `type`: input (uncached), cache_read, cache_write, output |
| `nikita.model.cost` | counter, USD | `kind`, `pricing`: billed, uncached (had nothing been cached) |
| `nikita.refusals` | counter | `limit`: user_daily_tokens, group_daily_tokens, daily_tokens, rate_* |
| `nikita.jobs.runs` / `nikita.job.duration` | counter / histogram, s | `job`, `result` (ok, failed) |
| `nikita.reminders.sent`, `nikita.touchpoints.sent` | counter | (touchpoints: follow-ups and check-ins) |
| `nikita.errors` | counter | `event` (the log line's message), `level`, `error.type` |
| `nikita.facts.dropped` | counter | `writer` (extraction, tool), `reason` (why not the person's) |
| `nikita.inbox.depth` | gauge | `status`: pending, replying |
| `nikita.inbox.oldest_wait` | gauge, s | the oldest update still waiting for its answer |
| `nikita.job.lag` | gauge, s | `job`: postprocess, touchpoints, day-summaries (the oldest due work's wait) |
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, Meter

# Seconds: a turn or a job between a few milliseconds and a couple of minutes.
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)


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
    touchpoints_sent: Counter
    errors: Counter
    facts_dropped: Counter

    @classmethod
    def create(cls, meter: Meter) -> Instruments:
        """The instruments on `meter`."""

        def count(name: str, unit: str, description: str) -> Counter:
            return meter.create_counter(name, unit=unit, description=description)

        def seconds(name: str, description: str) -> Histogram:
            return meter.create_histogram(
                name, unit="s", description=description, explicit_bucket_boundaries_advisory=DURATION_BUCKETS
            )

        return cls(
            turns=count("nikita.turns", "{turn}", "Turns run"),
            turn_duration=seconds("nikita.turn.duration", "A turn from its start to its answer stored"),
            model_calls=count("nikita.model.calls", "{call}", "Model calls"),
            tokens=count("nikita.model.tokens", "{token}", "Model tokens"),
            cost=count("nikita.model.cost", "USD", "Estimated model cost (genai-prices)"),
            refusals=count("nikita.refusals", "{refusal}", "Requests refused"),
            job_runs=count("nikita.jobs.runs", "{run}", "Job runs"),
            job_duration=seconds("nikita.job.duration", "One run of a job"),
            reminders_sent=count("nikita.reminders.sent", "{message}", "Reminders sent"),
            touchpoints_sent=count(
                "nikita.touchpoints.sent", "{message}", "Touchpoints (follow-ups, check-ins) sent"
            ),
            errors=count("nikita.errors", "{event}", "Warnings and errors logged, by event"),
            facts_dropped=count(
                "nikita.facts.dropped",
                "{fact}",
                "Facts not stored: they did not stand on the person's own words",
            ),
        )
