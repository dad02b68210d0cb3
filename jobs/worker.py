"""The post-processing worker: claim, run the pipeline, record the outcome; repeat until idle."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import timedelta
from typing import Any

from agent.core import observability
from jobs.context import JobContext
from jobs.pipeline import Loaded, load, run_pipeline
from jobs.queue import claim_and_read, record_failure, requeue

logger = logging.getLogger(__name__)


async def process_one(ctx: JobContext, conversation_id: int, loaded: Loaded | None = None) -> bool:
    """Run the pipeline for a conversation this worker has claimed; False when it failed.

    A trace of its own, linked to the turns of the conversation.
    """
    with observability.root_span("job postprocess", {"nikita.job": "postprocess"}):
        await observability.link_turns(ctx.sessions, conversation_id=conversation_id)
        return await _process(ctx, conversation_id, loaded)


async def _process(ctx: JobContext, conversation_id: int, loaded: Loaded | None) -> bool:
    try:
        counts = await run_pipeline(ctx, conversation_id, loaded=loaded)
    except Exception as exc:
        # The job boundary: any fault (model, database, graph) is recorded and retried with backoff,
        # never allowed to kill the worker or lose the conversation.
        status = await record_failure(
            ctx.sessions,
            conversation_id,
            ctx.worker_id,
            f"{type(exc).__name__}: {exc}",
            ctx.clock.now(),
            retry=ctx.retry,
        )
        logger.warning(
            "post-processing failed",
            extra={"conversation_id": conversation_id, "status": status},
            exc_info=exc,
        )
        return False
    logger.info("conversation processed", extra={"conversation_id": conversation_id, **counts})
    return True


async def process_queue(
    ctx: JobContext, *, conversation_id: int | None = None, limit: int | None = None
) -> dict[str, Any]:
    """Process due conversations until the queue is empty or `limit` were claimed.

    With `conversation_id`, that conversation is requeued first (`--conversation`, `/reprocess`).
    """
    counts: Counter[str] = Counter()
    if conversation_id is not None and not await requeue(ctx.sessions, conversation_id, ctx.clock.now()):
        return {"claimed": 0, "processed": 0, "failed": 0, "not_found": 1}
    timeout = timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds)
    while limit is None or counts["claimed"] < limit:
        # The pipeline's first reads share the claim's transaction.
        claimed = await claim_and_read(ctx.sessions, ctx.worker_id, ctx.clock.now(), timeout, load)
        if claimed is None:
            break
        counts["claimed"] += 1
        counts["processed" if await process_one(ctx, *claimed) else "failed"] += 1
        if conversation_id is not None:
            break
    return {"claimed": counts["claimed"], "processed": counts["processed"], "failed": counts["failed"]}
