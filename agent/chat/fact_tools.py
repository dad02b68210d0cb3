"""The chat agent's tools for a person steering one remembered fact: pin it ("remember this above
all"), reword it ("actually, say it as ...") and say where it comes from ("why do you think that?");
each docstring is the prompt the model reads.

Like every tool they act on `ctx.deps.user_id` alone (in a group, the group's own facts): no argument
names an owner, and a fact is found among that owner's held facts only, so nothing the model sends
reaches anyone else's. In a group they change nothing unless the sender administers it
(`TurnDeps.may_change_memory`).
"""

from __future__ import annotations

from typing import Any
from zoneinfo import ZoneInfo

from pydantic_ai import FunctionToolset, ModelRetry, RunContext

from agent.chat.deps import TurnDeps, refused_change
from agent.chat.tools import MAX_ID, NOT_THEIRS, said_here
from agent.core.errors import FactRejectedError
from agent.core.settings import Settings
from agent.memory.corrections import Matched, named_by
from agent.memory.facts import clean_fact
from agent.memory.listing import reword, set_flag
from agent.memory.provenance import explain
from db.repositories.facts import FactRepository

fact_tools: FunctionToolset[TurnDeps] = FunctionToolset()

UNAVAILABLE = "memory is not available right now"
NO_MATCH = "no remembered fact matches; memory_search shows how it is worded"


async def _held(ctx: RunContext[TurnDeps], fact: str) -> Matched | None:
    """The owner's held fact these words name best, if any."""
    async with ctx.deps.sessions() as session:
        found = named_by(fact, await FactRepository(session).held(ctx.deps.user_id))
    return next((m for m in found if m.fact_id is not None), None)


def _cleaned(settings: Settings, text: str) -> str:
    try:
        return clean_fact(text, max_chars=settings.memory_fact_max_chars)
    except FactRejectedError as exc:
        raise ModelRetry(str(exc)) from exc


@fact_tools.tool
async def memory_pin(ctx: RunContext[TurnDeps], fact: str, pinned: bool = True) -> dict[str, Any]:
    """Pin a fact about this person so it always comes first in what you know of them: when they ask
    you to remember something above all ("never forget that I'm allergic to nuts", "this is the most
    important thing about me"). A fact you do not hold yet is saved, pinned. `pinned=false` when they
    say it no longer needs to come first.

    Args:
        fact: The fact as you remember it, in a few words, e.g. "allergic to nuts"; when it is new,
            one short sentence in the third person, e.g. "Is allergic to nuts".
        pinned: False to unpin it.
    """
    if (refused := refused_change(ctx.deps)) is not None:
        return refused
    facts = ctx.deps.facts
    if facts is None:
        return {"pinned": False, "note": UNAVAILABLE}
    held, saved = await _held(ctx, fact), False
    if held is not None and held.fact_id is not None:
        fact_id = held.fact_id
    elif pinned:
        text = _cleaned(facts.settings, fact)
        sources = await said_here(ctx, text)
        if sources is None:
            return {"pinned": False, "note": NOT_THEIRS}
        added = await facts.add(
            ctx.deps.user_id,
            text,
            conversation_id=ctx.deps.conversation_id,
            at=ctx.deps.now,
            message_ids=sources,
        )
        fact_id, saved = added.fact_id, added.created
    else:
        return {"pinned": False, "note": NO_MATCH}
    changed = await set_flag(
        ctx.deps.sessions, ctx.deps.user_id, fact_id, "pin" if pinned else "unpin", at=ctx.deps.now
    )
    if changed is None:
        return {"pinned": False, "note": NO_MATCH}
    facts.changed(ctx.deps.user_id)
    return {"pinned": changed.pinned, "fact": changed.content, "fact_id": changed.id, "saved": saved}


@fact_tools.tool
async def memory_reword(ctx: RunContext[TurnDeps], fact: str, wording: str) -> dict[str, Any]:
    """Reword a remembered fact that is right but put wrongly, in the words the person asks for
    ("actually, say it as: works night shifts as a nurse", "call it my partner, not my boyfriend").
    The fact keeps its place and whether it is pinned. For a fact that is wrong or out of date, use
    `memory_correct`.

    Args:
        fact: The fact as you remember it, in a few words, e.g. "works as a nurse".
        wording: The new wording as one short sentence in the third person, e.g.
            "Works night shifts as a nurse".
    """
    if (refused := refused_change(ctx.deps)) is not None:
        return refused
    facts = ctx.deps.facts
    if facts is None:
        return {"reworded": False, "note": UNAVAILABLE}
    text = _cleaned(facts.settings, wording)
    held = await _held(ctx, fact)
    changed = None
    if held is not None and held.fact_id is not None:
        changed = await reword(
            ctx.deps.sessions,
            ctx.deps.user_id,
            held.fact_id,
            text,
            at=ctx.deps.now,
            max_chars=facts.settings.memory_fact_max_chars,
        )
    if held is None or changed is None:
        return {"reworded": False, "note": NO_MATCH}
    facts.changed(ctx.deps.user_id)
    return {"reworded": True, "before": held.text, "now": changed.content, "fact_id": changed.id}


@fact_tools.tool
async def memory_sources(
    ctx: RunContext[TurnDeps], fact: str = "", fact_id: int | None = None
) -> dict[str, Any]:
    """Say where a remembered fact comes from, when they ask why you think something or how you know
    it ("why do you think I'm a nurse?", "where did you get that?"): their own lines with the day
    each was said, that they asked you to remember it, that it was said in a call, or that no source
    is left (its messages were forgotten). Quote only the lines returned; never make up a source.

    Args:
        fact: The fact as you remember it, in a few words, e.g. "works as a nurse".
        fact_id: The fact's id from `memory_search`, instead of `fact`, when you have it.
    """
    if ctx.deps.facts is None:
        return {"facts": [], "note": UNAVAILABLE}
    if fact_id is not None and not 1 <= fact_id <= MAX_ID:
        raise ModelRetry(f"fact_id must be an id from memory_search (a positive number), got {fact_id}")
    if fact_id is None and not fact.strip():
        raise ModelRetry("say which fact: its words in `fact`, or its id from memory_search in `fact_id`")
    found = await explain(
        ctx.deps.sessions, ctx.deps.user_id, ZoneInfo(ctx.deps.timezone), fact_id=fact_id, about=fact
    )
    if not found:
        return {"facts": [], "note": NO_MATCH}
    return {"facts": [f.as_dict() for f in found]}
