"""The `graph` job: the knowledge graph follows each person's rows, durably: the list of facts,
the final days' key moments and the persona's thoughts (db/repositories/graph_work.py).

Every change of them (post-processing, the memory tools, tidying, an import, a day's summary, a
forget) marks the person in its own transaction (db/repositories/facts.py's `mark_changed`), so a
crash loses nothing the graph has yet to show. Per person: claim (the work queue's lease, db/work.py; the
rows the graph does not show as they stand read in the same transaction, a batch at a time) -> the
graph written outside any transaction (agent/memory/graph.py's `show`: each row an episode of a
stable id, so a rerun writes nothing twice) -> what the graph now shows recorded under the lease. A
failure is retried with backoff, then given up until the rows change again (counted in /stats).
With the graph off, people are marked as followed and nothing waits.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, timedelta
from typing import Any

from agent.core.errors import UserForgottenError
from agent.core.usage import metering, store_usage_apart
from agent.memory.graph import show
from db.repositories.consolidations import GRAPH, Claim, ConsolidationRepository
from db.repositories.graph_work import Due, record_shown, settle_without_graph, unshown
from jobs.context import JobContext

logger = logging.getLogger(__name__)

# Rows written per claim: a person with many (a graph turned on, an import) is followed in
# batches, each well inside the lease.
BATCH = 20
COUNTS = ("claimed", "followed", "failed", "lost", "written", "ended")


async def follow_lists(ctx: JobContext, *, limit: int | None = None) -> dict[str, Any]:
    """Make the graph follow every due person's rows until none is left or `limit` were claimed."""
    counts: Counter[str] = Counter()
    if ctx.graph is None:
        if ctx.settings.graph_backend == "none":
            async with ctx.sessions() as session, session.begin():
                counts["followed"] = await settle_without_graph(session)
        return {key: counts[key] for key in COUNTS}
    lease = timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds)
    while limit is None or counts["claimed"] < limit:
        async with ctx.sessions() as session, session.begin():
            now = ctx.clock.now()
            claim = await ConsolidationRepository(session, GRAPH).claim(
                now, lease, max_attempts=ctx.retry.max_attempts
            )
            if claim is None:
                break
            rows = await unshown(session, claim.user_id)
        counts["claimed"] += 1
        counts.update(await _follow(ctx, claim, rows))
    return {key: counts[key] for key in COUNTS}


async def _follow(ctx: JobContext, claim: Claim, rows: list[Due]) -> Counter[str]:
    """Write one claimed person's batch; the counts of its outcome (never raises for a graph or
    database fault: the attempt is recorded and retried)."""
    now = ctx.clock.now()
    batch, more = rows[:BATCH], len(rows) > BATCH
    with metering() as meter:
        try:
            shown = await show(ctx.graph, claim.user_id, batch, now=now)
        except UserForgottenError:
            return Counter(lost=1)  # their rows went with them
        except Exception as exc:
            # The job boundary, as tidying's: any fault is retried with backoff, never lost.
            async with ctx.sessions() as session, session.begin():
                status = await ConsolidationRepository(session, GRAPH).fail(
                    claim, repr(exc), ctx.clock.now(), retry=ctx.retry
                )
            logger.warning(
                "graph not followed", extra={"user_id": claim.user_id, "status": status}, exc_info=exc
            )
            return Counter(failed=1)
        finally:
            await store_usage_apart(ctx.sessions, claim.user_id, now.astimezone(UTC).date(), meter)
    async with ctx.sessions() as session, session.begin():
        work = ConsolidationRepository(session, GRAPH)
        if await work.hold(claim) is None:
            return Counter(lost=1)
        await record_shown(session, claim.user_id, shown)
        if more:
            await work.release(claim)  # still due: the next batch is claimed at once
        else:
            await work.finish(claim, now, up_to=claim.seen)
    written = sum(key is not None for key in shown.values())
    logger.info("graph followed the rows", extra={"user_id": claim.user_id, "written": written})
    return Counter(followed=int(not more), written=written, ended=len(shown) - written)
