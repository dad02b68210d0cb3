"""The import pacer: imported conversations go to post-processing at the operator's pace.

An import stores a person's conversations from another assistant's export as IMPORT_WAITING
(agent/account and db/repositories/import_queue.py). Each run of this job (the `imports` job, each
minute) tops the post-processing queue up to IMPORT_CONVERSATIONS_PER_RUN imported conversations in
flight, oldest first, taking them in turns across people (those who spent least on imports today
first), and none for a person whose import spend today reached IMPORT_DAILY_TOKENS, nor for anyone
once the bot-wide DAILY_TOKENS is reached. The worker then post-processes them (jobs/imported.py)
and meters them as "import", apart from chat. A day's spend is a UTC day, as the other caps'. Once
every conversation of an import is post-processed, the chat it came from is told what it taught.
"""

from __future__ import annotations

import logging
from datetime import UTC
from typing import Any

from agent.account.imports import SOURCES, learned_text
from agent.core.errors import RecipientBlockedError, SendFailedError
from db.repositories.import_queue import ImportQueueRepository
from db.repositories.usage import UsageRepository
from jobs.context import JobContext

logger = logging.getLogger(__name__)


async def pace_imports(ctx: JobContext) -> dict[str, Any]:
    """Queue the next imported conversations for post-processing, and tell each person whose import
    is all learned what it taught the bot; the counts of this run."""
    counts = await _queue_next(ctx)
    counts["told"] = await _tell_learned(ctx)
    return counts


async def _tell_learned(ctx: JobContext) -> int:
    """Send the last message of each import whose conversations are all post-processed: the facts it
    taught and the days it covers. Once per run (the first pacer to take it), and only to the chat
    the import came from (an operator's import from the command line tells no one)."""
    told = 0
    async with ctx.sessions() as session:
        runs = await ImportQueueRepository(session).learned_runs()
    for run in runs:
        async with ctx.sessions() as session, session.begin():
            queue = ImportQueueRepository(session)
            if not await queue.mark_learned(run.id, now=ctx.clock.now()):
                continue
            learned = await queue.progress(run.user_id, run.id)
        if run.chat_id is None or ctx.messenger is None:
            continue
        text = learned_text(SOURCES.get(run.source, run.source), learned.facts, learned.days)
        try:
            await ctx.messenger.send(run.chat_id, text, start=0, on_sent=_sent)
        except (RecipientBlockedError, SendFailedError) as exc:
            # Told at most once: a lost notice is better than the same one twice.
            logger.warning("import notice not sent", extra={"import_id": run.id, "error": type(exc).__name__})
            continue
        told += 1
    return told


async def _sent(sent: int, total: int) -> None:
    """Nothing to count per chunk: the run was taken before sending."""


async def _queue_next(ctx: JobContext) -> dict[str, Any]:
    """Queue the next imported conversations for post-processing; the counts of this step."""
    per_run, cap = ctx.settings.import_conversations_per_run, ctx.settings.import_daily_tokens
    day = ctx.clock.now().astimezone(UTC).date()
    async with ctx.sessions() as session:
        queue = ImportQueueRepository(session)
        owners = await queue.waiting_owners()
        if not owners or per_run <= 0:
            return {"queued": 0, "waiting_people": len(owners), "capped_people": 0}
        slots = per_run - await queue.in_flight()
        usage = UsageRepository(session)
        bot_wide = ctx.settings.daily_tokens
        if bot_wide > 0 and (await usage.spent(day))[0] >= bot_wide:
            slots = 0
        spent = await usage.import_spent(day, owners)
    eligible = [user for user in owners if cap <= 0 or spent.get(user, 0) < cap]
    capped = len(owners) - len(eligible)
    if slots <= 0 or not eligible:
        return {"queued": 0, "waiting_people": len(owners), "capped_people": capped}
    # Those who spent least on imports today go first; each person's oldest conversations first.
    eligible.sort(key=lambda user: (spent.get(user, 0), user))
    async with ctx.sessions() as session:
        queue = ImportQueueRepository(session)
        waiting = [await queue.oldest_waiting(user, slots) for user in eligible[:slots]]
    picked: list[int] = []
    for turn in range(slots):
        picked += [ids[turn] for ids in waiting if turn < len(ids)]
    async with ctx.sessions() as session, session.begin():
        queued = await ImportQueueRepository(session).queue(picked[:slots])
    return {"queued": queued, "waiting_people": len(owners), "capped_people": capped}
