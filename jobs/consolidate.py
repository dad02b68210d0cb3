"""The `consolidate` job: each person whose facts changed is tidied once, while the person is away.

Per person: claim (a lease, one statement; the person's facts read in the same transaction) ->
the plan without a model (past plans, exact and near duplicates) -> one SUMMARY_MODEL call on
what is left (paraphrases, contradictions, sections, plans' dates), outside any transaction ->
every change in one transaction, with the model's usage, under the lease, after checking that the
facts it touches still read as the model saw them. A failure changes nothing and is retried with
backoff; a person whose facts did not change is never claimed, so no model is called for them.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import GROUP
from agent.core.caching import static_cache_settings
from agent.core.errors import ConfigurationError
from agent.core.usage import UsageMeter, metering, store_usage, store_usage_apart
from agent.digest.summaries import summary_model_settings
from agent.memory.consolidation import ask_model, instructions_for, take_answer
from agent.memory.tidying import Held, Plan, model_free_plan
from db.models import User
from db.repositories.consolidations import Claim, ConsolidationRepository
from db.repositories.fact_tidying import FactTidying
from db.repositories.facts import FactRepository
from db.repositories.threads import ThreadRepository
from jobs.context import JobContext

logger = logging.getLogger(__name__)

# What a run reports: people claimed and their outcomes (consolidated; failed, to be retried;
# stale, nothing written and planned again; lost, the lease taken over or the person forgotten),
# model calls, and the changes made.
COUNTS = (
    "claimed",
    "consolidated",
    "failed",
    "stale",
    "lost",
    "model_calls",
    "merged",
    "superseded",
    "retired",
    "placed",
    "asked",
)


@dataclass(frozen=True)
class Person:
    """A claimed person (or group): where they live (plans' dates), and their held facts."""

    id: int
    group: bool
    timezone: str
    # The person's own name: a fact's subject, not a word that tells two facts apart.
    subject: tuple[str, ...]
    facts: list[Held]


async def consolidate_due(ctx: JobContext, *, limit: int | None = None) -> dict[str, Any]:
    """Tidy due people until none is left or `limit` were claimed; the counts of what changed."""
    counts: Counter[str] = Counter()
    lease = timedelta(seconds=ctx.settings.postprocess_claim_timeout_seconds)
    while limit is None or counts["claimed"] < limit:
        claimed = await _claim(ctx, lease)
        if claimed is None:
            break
        counts["claimed"] += 1
        counts.update(await consolidate_person(ctx, *claimed))
    return {key: counts[key] for key in COUNTS}


async def _claim(ctx: JobContext, lease: timedelta) -> tuple[Claim, Person] | None:
    async with ctx.sessions() as session, session.begin():
        claim = await ConsolidationRepository(session).claim(
            ctx.clock.now(), lease, max_attempts=ctx.retry.max_attempts
        )
        if claim is None:
            return None
        return claim, await _person(session, claim.user_id)


async def _person(session: AsyncSession, user_id: int) -> Person:
    user = await session.get(User, user_id)
    group = user is not None and user.kind == GROUP
    name = (user.name or "") if user is not None and not group else ""
    facts = [Held.of(f) for f in await FactRepository(session).held(user_id)]
    return Person(user_id, group, user.timezone if user else "UTC", tuple(name.lower().split()), facts)


async def consolidate_person(ctx: JobContext, claim: Claim, person: Person) -> Counter[str]:
    """Tidy one claimed person; the counts of its outcome and changes (never raises for a model or
    database fault: the attempt is recorded and retried)."""
    now = ctx.clock.now()
    plan = model_free_plan(person.facts, now, subject=person.subject)
    with metering() as meter:
        try:
            calls = await _ask(ctx, plan, person, now)
            outcome, changes = await _apply(ctx, claim, person, plan, meter)
        except Exception as exc:
            # The job boundary, as post-processing's: any fault (model, timeout, database) leaves
            # the facts as they were and is retried with backoff, never lost or half-written.
            status = await _record_failure(ctx, claim, exc, now)
            logger.warning(
                "consolidation failed", extra={"user_id": person.id, "status": status}, exc_info=exc
            )
            await store_usage_apart(ctx.sessions, person.id, now.astimezone(UTC).date(), meter)
            return Counter(failed=1)
    if outcome != "consolidated":  # nothing written: the call's usage is stored on its own
        await store_usage_apart(ctx.sessions, person.id, now.astimezone(UTC).date(), meter)
    else:
        logger.info("facts consolidated", extra={"user_id": person.id, "model_calls": calls, **changes})
    return Counter({outcome: 1, "model_calls": calls, **changes})


async def _ask(ctx: JobContext, plan: Plan, person: Person, now: datetime) -> int:
    """The model's answer taken into the plan; how many model calls were made (0 or 1)."""
    newest = sorted(plan.shown(), key=lambda f: (f.last_seen, f.id), reverse=True)
    shown = newest[: ctx.settings.consolidate_max_facts]
    if not shown:
        return 0
    settings = ctx.settings
    static = instructions_for(group=person.group)
    try:
        answer = await ask_model(
            ctx.summary_model,
            shown,
            today=now.astimezone(UTC).date(),
            group=person.group,
            model_settings=summary_model_settings(settings)
            | static_cache_settings(settings, settings.summary_model, static),
            timeout_seconds=settings.summary_timeout_seconds,
        )
    except ConfigurationError:
        # No summary model (its key is not configured): the model-free tidying alone.
        return 0
    take_answer(plan, answer, shown, now=now, timezone=person.timezone)
    return 1


async def _apply(
    ctx: JobContext, claim: Claim, person: Person, plan: Plan, meter: UsageMeter
) -> tuple[str, dict[str, int]]:
    """Write the plan in one transaction under the claim's lease: the outcome and the changes."""
    now = ctx.clock.now()
    async with ctx.sessions() as session, session.begin():
        consolidations, facts = ConsolidationRepository(session), FactRepository(session)
        # Lock order: the facts' rows, then the person's consolidation row, as every fact change
        # takes them (so the two never wait on each other). SQLite's writer holds the whole
        # database from its first write: there the consolidation row goes first.
        if session.get_bind().dialect.name == "sqlite":
            changed_at = await consolidations.hold(claim)
            current = await facts.held(person.id, lock=True)
        else:
            current = await facts.held(person.id, lock=True)
            changed_at = await consolidations.hold(claim)
        if changed_at is None:
            return "lost", {}
        stored = {f.id: f for f in current}
        if any(i not in stored or not plan.facts[i].same_as(stored[i]) for i in plan.touched()):
            # The person changed a fact the plan touches while the model read it: the person is
            # planned again from the facts as they are now.
            await consolidations.release(claim)
            return "stale", {}
        changes = await _write(session, person, plan, now)
        # A change committed since the claim (a new fact) was not seen: the person stays due.
        await consolidations.finish(claim, now, up_to=None if changed_at == claim.seen else claim.seen)
        # Last: it locks the day's token counter until the commit (agent/core/usage.py).
        await store_usage(session, person.id, now.astimezone(UTC).date(), meter)
    return "consolidated", changes


async def _write(session: AsyncSession, person: Person, plan: Plan, now: datetime) -> dict[str, int]:
    facts = FactTidying(session)
    merged = await facts.absorb(person.id, plan.merges, now)
    superseded = placed = 0
    for older, newer in plan.supersessions:
        reason = f"replaced by a later fact: {plan.facts[newer].content}"
        superseded += await facts.supersede(person.id, [older], by=newer, at=now, reason=reason)
    retired = await facts.invalidate(person.id, plan.retirements, now, reason="the plan's date has passed")
    for fact_id, (category, until) in plan.placements.items():
        placed += await facts.place(person.id, fact_id, now, category=category, valid_until=until) is not None
    questions = [("question", question.text()) for question in plan.questions]
    asked = await ThreadRepository(session).open_threads(person.id, None, questions, now)
    return {"merged": merged, "superseded": superseded, "retired": retired, "placed": placed, "asked": asked}


async def _record_failure(ctx: JobContext, claim: Claim, exc: BaseException, now: datetime) -> str | None:
    async with ctx.sessions() as session, session.begin():
        error = f"{type(exc).__name__}: {exc}"
        return await ConsolidationRepository(session).fail(claim, error, now, retry=ctx.retry)
