"""The named jobs: one entry point for the scheduler, the CLI and `POST /tasks/<name>`."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agent.core import observability
from jobs.errors import UnknownJobError

if TYPE_CHECKING:  # the job's context brings in the models' library, which the names alone do not need
    from jobs.context import JobContext

logger = logging.getLogger(__name__)

# Names an operator may still type (`jobs run`, `POST /tasks/<name>`, a scheduler's configuration):
# the job they name runs, under its own name in logs and metrics.
JOB_ALIASES: dict[str, str] = {"sessions": "close-idle-conversations"}


async def _close_idle_conversations(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.conversations import close_idle_conversations

    return await close_idle_conversations(ctx)


async def _imports(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.imports import pace_imports

    return await pace_imports(ctx)


async def _postprocess(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.worker import process_queue

    return await process_queue(
        ctx, conversation_id=options.get("conversation_id"), limit=options.get("limit")
    )


async def _consolidate(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.consolidate import consolidate_due

    return await consolidate_due(ctx, limit=options.get("limit"))


async def _graph(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.graph import follow_lists

    return await follow_lists(ctx, limit=options.get("limit"))


async def _day_summaries(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.day_summary import run_due_summaries

    return await run_due_summaries(ctx)


async def _nightly(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.nightly import finalise_days

    return await finalise_days(ctx)


async def _forget(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from agent.account.forget import finish_pending_forgets

    return await finish_pending_forgets(ctx.sessions, ctx.data_stores, guard=ctx.guard, caches=ctx.caches)


async def _touchpoints(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.touchpoints import deliver_due

    return await deliver_due(ctx, limit=options.get("limit"))


async def _retention(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.retention import run_retention

    return await run_retention(ctx, sweep=bool(options.get("sweep")))


async def _slim_histories(ctx: JobContext, **options: Any) -> dict[str, Any]:
    from jobs.retention import slim_histories

    return await slim_histories(ctx)


_JOBS: dict[str, Callable[..., Awaitable[dict[str, Any]]]] = {
    "close-idle-conversations": _close_idle_conversations,
    "imports": _imports,
    "postprocess": _postprocess,
    "consolidate": _consolidate,
    "graph": _graph,
    "day-summaries": _day_summaries,
    "nightly": _nightly,
    "forget": _forget,
    "touchpoints": _touchpoints,
    "retention": _retention,
    "slim-histories": _slim_histories,
}
JOB_NAMES: tuple[str, ...] = tuple(_JOBS)


async def run_job(name: str, ctx: JobContext, **options: Any) -> dict[str, Any]:
    """Run one job once and return its counts (postprocess takes `conversation_id=` and `limit=`,
    consolidate, graph and touchpoints `limit=`, retention `sweep=`); an alias runs the job it names."""
    name = JOB_ALIASES.get(name, name)
    job = _JOBS.get(name)
    if job is None:
        raise UnknownJobError(f"unknown job {name!r}; known: {', '.join(JOB_NAMES)}")
    started = time.perf_counter()
    try:
        counts = await job(ctx, **options)
    except BaseException:
        observability.job_done(name, time.perf_counter() - started, failed=True)
        raise
    observability.job_done(name, time.perf_counter() - started, failed=False)
    elapsed_ms = round((time.perf_counter() - started) * 1000, 1)
    # The scheduler runs every job each minute: a run that found nothing to do is not news
    # (`no_sender` says where touchpoints cannot go, not that there were any).
    level = logging.INFO if any(v for k, v in counts.items() if k != "no_sender") else logging.DEBUG
    logger.log(level, "job done", extra={"job": name, "elapsed_ms": elapsed_ms, **counts})
    return counts
