"""The briefing refresh: after a conversation's post-processing and nightly, never inside a turn.

The user's context package is collected as a turn would see it (the open conversation left out),
and when it differs from the one the stored briefing was written from, the summary model edits the
briefing (agent/context/briefing/writer.py). The draft is validated (agent/context/briefing/checks.py): a
valid one replaces the stored one; a failed one is logged and the previous valid one stays. Its
cost goes into the usage table as the `briefing` kind. Nothing is written while every user's
turns are served by v1.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from datetime import UTC
from typing import Literal

from pydantic_ai.exceptions import AgentRunError, UserError

from agent.account.groups import is_group
from agent.context.briefing.checks import validate
from agent.context.briefing.writer import FINGERPRINT_PARTS, fingerprint, open_threads, write_briefing
from agent.context.budget import Budgets
from agent.context.engine import route_for
from agent.context.package import PackageCollector
from agent.core.tokens import get_counter
from agent.core.usage import metering, store_usage_apart
from db.models import User
from db.repositories.briefings import BriefingRepository, StoredBriefing
from db.repositories.conversations import ConversationRepository
from db.repositories.users import user_present
from jobs.context import JobContext

logger = logging.getLogger(__name__)

Outcome = Literal["off", "missing", "incomplete", "unchanged", "failed", "rejected", "written"]
Trigger = Literal["conversation", "nightly"]


async def refresh_briefing(
    ctx: JobContext, user_id: int, *, trigger: Trigger, conversation_id: int | None = None
) -> Outcome:
    """Write the user's briefing anew if their package changed; never raises for the model's failure."""
    settings = ctx.settings
    if route_for(settings, user_id) == "v1":
        return "off"
    async with ctx.sessions() as session:
        user = await session.get(User, user_id)
        if user is None:
            return "missing"
        active = await ConversationRepository(session).active_for(user_id)
        previous = await BriefingRepository(session).get(user_id)
    counter = get_counter()
    budgets = Budgets.from_settings(settings)
    now = ctx.clock.now()
    collector = PackageCollector(
        settings,
        facts=None,
        counter=counter,
        today_budget=budgets.tiers["today"],
        profile_budget=budgets.tiers["profile"],
    )
    package = await collector.collect(
        ctx.sessions,
        user=user,
        conversation_id=active.id if active is not None else None,
        text="",
        now=now,
        previous_message_at=user.last_message_at,
        remaining=budgets.hard_cap,
    )
    failed_parts = [
        name for name, part in package.parts().items() if name in FINGERPRINT_PARTS and part.error
    ]
    if failed_parts:
        # A briefing written from a partial package would drop what the failed part holds.
        logger.warning(
            "briefing not written: package incomplete", extra={"user_id": user_id, "parts": failed_parts}
        )
        return "incomplete"
    stamp = fingerprint(package)
    if previous is not None and previous.fingerprint == stamp:
        return "unchanged"
    with metering() as meter:
        try:
            written = await write_briefing(
                ctx.summary_model,
                settings,
                package,
                previous.text if previous is not None else None,
                group=is_group(user),
            )
        except (AgentRunError, UserError, TimeoutError, OSError) as exc:
            logger.warning("briefing not written", extra={"user_id": user_id, "error": repr(exc)})
            return "failed"
        finally:
            await store_usage_apart(ctx.sessions, user_id, now.astimezone(UTC).date(), meter)
    draft = written.draft
    checks = validate(
        draft,
        threads=open_threads(package),
        previous_tokens=previous.text_tokens if previous is not None else None,
        settings=settings,
        counter=counter,
    )
    failed = [c for c in checks if not c.ok]
    if failed:
        logger.warning(
            "briefing rejected",
            extra={
                "user_id": user_id,
                "checks": {c.name: c.detail for c in failed},
                "kept_previous": previous is not None,
            },
        )
        return "rejected"
    text = draft.text()
    briefing = StoredBriefing(
        user_id=user_id,
        text=text,
        voice=draft.voice.strip(),
        fingerprint=stamp,
        text_tokens=counter.count(text),
        voice_tokens=counter.count(draft.voice),
        trigger=trigger,
        conversation_id=conversation_id,
        calls=written.calls,
        input_tokens=written.input_tokens,
        output_tokens=written.output_tokens,
        checks={"checks": {c.name: c.ok for c in checks}, "left_out": draft.left_out},
        written_at=now,
    )
    async with ctx.sessions() as session, session.begin():
        if not await user_present(session, user_id):
            return "missing"
        await BriefingRepository(session).put(briefing)
    logger.info(
        "briefing written",
        extra={
            "user_id": user_id,
            "trigger": trigger,
            **{k: v for k, v in asdict(briefing).items() if k.endswith("tokens")},
        },
    )
    return "written"
