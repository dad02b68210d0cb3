"""The consolidation agent: one SUMMARY_MODEL call reads an owner's facts and says which say the
same thing, which a later fact replaces, and where each belongs in the profile.

Its answer is advice, checked by `take_answer` into the plan (agent/memory/tidying.py): only the
ids it was shown count, a pinned fact is never replaced, and nothing is written here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import date, datetime

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agent.core.usage import record_run
from agent.memory.tidying import Held, Plan, Section


class SameFacts(BaseModel):
    """Facts that say the same thing."""

    ids: list[int] = Field(description="Two or more ids of facts that say the same thing.")
    keep: int = Field(description="The id among them whose words say it best (the most precise).")


class Replaced(BaseModel):
    """A fact no longer true because a later one replaces it."""

    older: int = Field(description="The id of the fact that no longer holds.")
    newer: int = Field(description="The id of the later fact that holds now.")


class Placed(BaseModel):
    """Where a fact belongs in the profile, and a plan's date."""

    id: int
    section: Section
    plan_date: str | None = Field(
        default=None, description="For a plan whose day is known: that day as YYYY-MM-DD; otherwise null."
    )


class Tidying(BaseModel):
    """The typed answer of a consolidation."""

    same: list[SameFacts] = Field(
        default_factory=list, description="Groups of facts that say the same thing."
    )
    replaced: list[Replaced] = Field(default_factory=list, description="Facts a later fact replaces.")
    sections: list[Placed] = Field(
        default_factory=list, description="A section for each fact shown without one; dates of plans."
    )


CONSOLIDATION_INSTRUCTIONS = """\
You keep tidy what a companion knows about a person: facts learned from their conversations, each \
shown as [id; when it was last said and how often; its section or "no section"; "pinned" when the \
person pinned it; a plan's date] and its words. Answer with:
- same: groups of facts that say the same thing (the same fact twice, a paraphrase, one wording \
more precise than another), with `keep`, the id whose words say it best. Only what is truly the \
same: "has two cats" and "has a cat named Mio" are two facts.
- replaced: a fact that no longer holds because a later one replaces it ("lives in Lisbon", later \
"moved to Porto"; "works at Acme", later "left Acme for a school"): `older` the one replaced, \
`newer` the one that holds now. Facts that can both be true are not replaced ("likes tea", \
"likes coffee").
- sections: for each fact shown with "no section", where it belongs: identity (name, age, where \
they live, work, studies), people (family, partner, friends, colleagues), health (health, diet, \
boundaries, what not to bring up), preference (likes, dislikes, habits), plan (something they \
will do or are doing), other. For a plan whose day is known (from its words and the date it was \
said), plan_date is that day; give it for a plan shown without a date too.
Use only the ids shown. Empty lists are fine: change nothing you are unsure of.
"""

GROUP_NOTE = """\
These facts belong to a group chat and are about its members, each by name: a fact about one \
member is never the same as, and never replaces, a fact about another member.

"""

consolidation_agent: Agent[None, Tidying] = Agent(
    output_type=Tidying, name="consolidation", defer_model_check=True
)


def instructions_for(*, group: bool) -> str:
    """The static instructions (a group's with its note first); the prompt cache keys on them."""
    return GROUP_NOTE + CONSOLIDATION_INSTRUCTIONS if group else CONSOLIDATION_INSTRUCTIONS


def fact_line(fact: Held) -> str:
    """One fact as the model reads it: `[id 12; said 2026-03-01, 3 times; identity; pinned] words`."""
    times = "once" if fact.reinforced == 1 else f"{fact.reinforced} times"
    marks = [
        f"id {fact.id}",
        f"said {fact.last_seen.date().isoformat()}, {times}",
        fact.category or "no section",
    ]
    if fact.pinned:
        marks.append("pinned")
    if fact.valid_until is not None:
        marks.append(f"until {fact.valid_until.date().isoformat()}")
    return f"[{'; '.join(marks)}] {' '.join(fact.content.split())}"


def facts_prompt(facts: Sequence[Held], today: date) -> str:
    """Today's date and the facts, in the order they were last said."""
    ordered = sorted(facts, key=lambda f: (f.last_seen, f.id))
    lines = "\n".join(fact_line(f) for f in ordered)
    return f"Today is {today.isoformat()} ({today.strftime('%A')}).\n\nFacts:\n{lines}"


async def ask_model(
    model: Model | str,
    facts: Sequence[Held],
    *,
    today: date,
    group: bool,
    model_settings: ModelSettings,
    timeout_seconds: float,
) -> Tidying:
    """One model call with a timeout; raises when the model fails (the job retries)."""
    async with asyncio.timeout(timeout_seconds):
        result = await consolidation_agent.run(
            facts_prompt(facts, today),
            model=model,
            instructions=instructions_for(group=group),
            model_settings=model_settings,
        )
    record_run("consolidation", result.usage)
    return result.output


def take_answer(plan: Plan, answer: Tidying, shown: Sequence[Held], *, now: datetime, timezone: str) -> None:
    """Add the model's answer to the plan, for the facts it was shown only."""
    ids = {f.id for f in shown}
    for same in answer.same:
        plan.merge([i for i in same.ids if i in ids], keep=same.keep)
    for replaced in answer.replaced:
        if replaced.older in ids and replaced.newer in ids:
            plan.supersede(replaced.older, replaced.newer)
    for placed in answer.sections:
        if placed.id in ids:
            plan.place(placed.id, placed.section, _day(placed.plan_date), now=now, timezone=timezone)


def _day(text: str | None) -> date | None:
    try:
        return date.fromisoformat(text.strip()[:10]) if text else None
    except ValueError:
        return None  # a date the model wrote otherwise: the plan keeps no date
