"""APScheduler wiring: the per-minute jobs, the nightly finalisation and the hourly retention inside
the bot process."""

from __future__ import annotations

import logging
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from jobs.context import JobContext
from jobs.registry import run_job

logger = logging.getLogger(__name__)

MINUTE_JOBS = (
    "close-idle-conversations",
    "imports",
    "postprocess",
    "consolidate",
    "graph",
    "day-summaries",
    "forget",
    "touchpoints",
)
# The jobs a scheduled run bounds, and the setting that bounds them.
_BATCH_LIMITS = {"postprocess": "postprocess_batch_limit", "consolidate": "consolidate_batch_limit"}


async def run_minute_jobs(ctx: JobContext) -> dict[str, dict[str, Any]]:
    """Conversation detection, the import pacer, post-processing, tidying the facts that changed, the
    graph following them, due in-day summaries, unfinished /forgets and due touchpoints, in that order."""
    results: dict[str, dict[str, Any]] = {}
    for name in MINUTE_JOBS:
        limit = _BATCH_LIMITS.get(name)
        options: dict[str, Any] = {"limit": getattr(ctx.settings, limit)} if limit else {}
        try:
            results[name] = await run_job(name, ctx, **options)
        except Exception:
            # One job's fault (e.g. the database blinking) must not stop the others or the scheduler.
            logger.exception("scheduled job failed", extra={"job": name})
    return results


async def run_nightly(ctx: JobContext) -> dict[str, Any]:
    """Finalise every day whose local midnight has passed."""
    return await run_job("nightly", ctx)


async def run_retention(ctx: JobContext, *, sweep: bool = False) -> dict[str, Any]:
    """Roll up finished days, prune and slim the context snapshots, empty old model histories (`sweep`:
    however old, as the first run after a start does)."""
    return await run_job("retention", ctx, sweep=sweep)


def schedule_jobs(scheduler: AsyncIOScheduler, ctx: JobContext) -> None:
    """Add the jobs to a running or not-yet-started scheduler (python-telegram-bot's JobQueue one)."""
    for job, minutes, name in (
        (run_minute_jobs, 1, "nikita-minute-jobs"),
        (run_nightly, ctx.settings.nightly_interval_minutes, "nikita-nightly"),
        (run_retention, 60, "nikita-retention"),
    ):
        scheduler.add_job(
            job,
            "interval",
            minutes=minutes,
            args=[ctx],
            id=name,
            replace_existing=True,
            max_instances=1,
            coalesce=True,
        )
    # Once, right after the start (however late the scheduler starts): the hourly runs look at the
    # last week's ended conversations only, this one at every one (after an upgrade, or a long stop).
    scheduler.add_job(
        run_retention,
        "date",
        args=[ctx],
        kwargs={"sweep": True},
        id="nikita-retention-sweep",
        replace_existing=True,
        misfire_grace_time=None,
    )
