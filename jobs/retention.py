"""The `retention` job: diagnostic data kept for a set time, slimmed and pruned in batches.

In order: the answered turns of every finished UTC day are counted into the roll-up (`turn_days`);
context snapshots older than SNAPSHOT_RETENTION_DAYS are deleted, except the newest of each
conversation and of each person; every snapshot but a person's newest loses its instructions text
(its counts, tiers and ids stay); the model history (PydanticAI's messages: what each request
carried, tool calls, notes) of conversations post-processed and ended longer than
HISTORY_RETENTION_DAYS ago is emptied: no turn reads it again, and the transcript keeps every word
said. The hourly run looks at the histories that passed the period in the last week; the bot's first
run after a start sweeps them all (an index range over old conversations, once).

`slim_histories` (the `slim-histories` job, for an operator after an upgrade) also writes the closed
conversations' histories stored in an older, wordier form again in the stored one: a pass over every
conversation's history, too much to repeat on its own. Those histories are emptied by the retention
period anyway; it only frees their space sooner.

Each batch is its own short transaction (a read, then one write by ids), so a turn never waits on
this job for longer than one batch. docs/operations.md#what-is-kept-how-long lists every table's
rule.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError

from agent.history.messages import dump_history, load_history
from agent.reports.dashboard import percentile
from db.models import Conversation
from db.repositories.retention import RetentionRepository, day_start
from jobs.context import JobContext

logger = logging.getLogger(__name__)

# A day is rolled up once it ended a day ago: a turn that began before midnight is stored by then.
_SETTLE = timedelta(days=1)
# The hourly run looks at the rows that passed a retention period (or were written) in the last week
# (a job down for days still catches up), never scanning every row ever kept again.
_SWEPT = timedelta(days=7)


async def roll_up_days(ctx: JobContext, today: date) -> tuple[int, date | None]:
    """Count every finished day not yet in the roll-up; returns (days added, first day not rolled)."""
    async with ctx.sessions() as session:
        repo = RetentionRepository(session)
        last = await repo.last_rolled_day()
        first_at = await repo.first_snapshot_at()
    if last is not None:
        day = last + timedelta(days=1)
    elif first_at is not None:
        day = first_at.date()
    else:
        return 0, None
    added = 0
    while day_start(day + timedelta(days=1)) + _SETTLE <= day_start(today):
        async with ctx.sessions() as session:
            repo = RetentionRepository(session)
            values = await repo.answered_ms(day)
            timed = [ms for ms in values if ms is not None]
            repo.add_day(day, len(values), len(timed), percentile(timed))
            try:
                await session.commit()
                added += 1
            except IntegrityError:  # another instance rolled this day up first: the same counts
                await session.rollback()
        day += timedelta(days=1)
    return added, day


Find = Callable[[RetentionRepository, int, int], Awaitable[list[int]]]
Act = Callable[[RetentionRepository, list[int]], Awaitable[int]]


async def in_batches(ctx: JobContext, find: Find, act: Act) -> int:
    """Find a batch of ids past the last one (a read), act on them in a short transaction of its own,
    and go on until none is found; returns how many rows were changed."""
    size, after, done = ctx.settings.retention_batch_size, 0, 0
    while True:
        async with ctx.sessions() as session:
            ids = await find(RetentionRepository(session), after, size)
        if not ids:
            return done
        async with ctx.sessions() as session, session.begin():
            done += await act(RetentionRepository(session), ids)
        after = ids[-1]


async def prune_snapshots(ctx: JobContext, cutoff: datetime, *, since: datetime | None) -> int:
    """Delete the snapshots taken before `cutoff` (from `since` on; None: however long ago) that are
    not the newest of their conversation or person."""
    return await in_batches(
        ctx, lambda repo, after, size: repo.prunable(cutoff, since, after, size), RetentionRepository.delete
    )


async def slim_snapshots(ctx: JobContext, *, since: datetime | None) -> int:
    """Clear the instructions text of every snapshot (taken from `since` on) but each person's newest."""
    return await in_batches(
        ctx, lambda repo, after, size: repo.wordy(since, after, size), RetentionRepository.clear_instructions
    )


async def empty_histories(ctx: JobContext, *, since: datetime | None) -> int:
    """Empty the model history of the conversations post-processed and ended before the history
    retention period (from `since` on; None: however long ago)."""
    cutoff = ctx.clock.now() - timedelta(days=ctx.settings.history_retention_days)
    return await in_batches(
        ctx,
        lambda repo, after, size: repo.ended_histories(cutoff, since, after, size),
        RetentionRepository.empty_histories,
    )


async def slim_histories(ctx: JobContext) -> dict[str, int]:
    """Empty every model history past the retention period, however old, and write the other closed
    conversations' histories stored in a wordier form again in the stored one.

    Only conversations no turn writes to any more (not active): a turn appending to its own history
    never races this rewrite.
    """
    emptied = await empty_histories(ctx, since=None)
    size, after, rewritten = ctx.settings.retention_batch_size, 0, 0
    while True:
        async with ctx.sessions() as session:
            rows = (
                await session.execute(
                    select(Conversation.id, Conversation.messages)
                    .where(Conversation.id > after, Conversation.status != "active")
                    .order_by(Conversation.id)
                    .limit(max(1, size // 10))  # histories are larger than snapshots
                )
            ).all()
        if not rows:
            return {"histories_emptied": emptied, "histories_slimmed": rewritten}
        changed: dict[int, list[Any]] = {}
        for conversation_id, raw in rows:
            if raw:
                slim = dump_history(load_history(raw))
                if slim != raw and slim:
                    changed[conversation_id] = slim
        if changed:
            async with ctx.sessions() as session, session.begin():
                for conversation_id, slim in changed.items():
                    await session.execute(
                        update(Conversation)
                        .where(Conversation.id == conversation_id, Conversation.status != "active")
                        .values(messages=slim)
                    )
            rewritten += len(changed)
        after = rows[-1][0]


async def run_retention(ctx: JobContext, *, sweep: bool = False) -> dict[str, Any]:
    """Roll up the finished days, prune and slim the snapshots, empty the model histories that ended
    past the retention period: those that passed it in the last week, or with `sweep` (the bot's
    first run after a start) however long ago."""
    now = ctx.clock.now()
    rolled, unrolled = await roll_up_days(ctx, now.date())
    cutoff = now - timedelta(days=ctx.settings.snapshot_retention_days)
    if unrolled is not None:  # never delete a snapshot whose day is not counted yet
        cutoff = min(cutoff, day_start(unrolled))

    # Each hourly run looks at the last week's rows only: the older ones it left were kept as the newest
    # of their conversation (which stays so) or of their person (which a later turn of theirs changes:
    # those wait for the sweep of the next start); a sweep looks at every row.
    def since(cutoff: datetime) -> datetime | None:
        return None if sweep else cutoff - _SWEPT

    history_cutoff = now - timedelta(days=ctx.settings.history_retention_days)
    return {
        "days_rolled_up": rolled,
        "snapshots_deleted": await prune_snapshots(ctx, cutoff, since=since(cutoff)),
        "snapshots_slimmed": await slim_snapshots(ctx, since=since(now)),
        "histories_emptied": await empty_histories(ctx, since=since(history_cutoff)),
    }
