"""Nightly finalisation: each user's day is summarised one last time once their local midnight passed."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

from pydantic_ai.exceptions import AgentRunError

from agent.core.clock import local_day
from db.repositories.day_summaries import DaySummaryRepository
from jobs.briefing_refresh import refresh_briefing
from jobs.context import JobContext
from jobs.day_summary import summarise_segment

logger = logging.getLogger(__name__)


async def finalise_days(ctx: JobContext) -> dict[str, Any]:
    """Finalise every open day segment whose day has ended in its own time zone."""
    now = ctx.clock.now()
    # No time zone is more than a day ahead of UTC, so later days cannot have ended yet.
    async with ctx.sessions() as session:
        candidates = [
            (s.id, s.user_id, s.day, s.timezone)
            for s in await DaySummaryRepository(session).open_until(now.date() + timedelta(days=1))
        ]
    ended = [
        (segment_id, user_id) for segment_id, user_id, day, zone in candidates if local_day(now, zone) > day
    ]
    finalised = failed = 0
    users: list[int] = []
    for segment_id, user_id in ended:
        try:
            await summarise_segment(ctx, segment_id, final=True)
            finalised += 1
            users.append(user_id)
        except (AgentRunError, TimeoutError, OSError) as exc:
            # Stays open: the next run (15 minutes later) tries again.
            failed += 1
            logger.warning("day finalisation failed", extra={"segment_id": segment_id, "error": repr(exc)})
    # A new day for these users: their briefing is written for it from the finished day.
    briefings = [await refresh_briefing(ctx, user_id, trigger="nightly") for user_id in dict.fromkeys(users)]
    return {
        "ended": len(ended),
        "finalised": finalised,
        "failed": failed,
        "briefings_written": briefings.count("written"),
    }
