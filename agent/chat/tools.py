"""The recall and memory tools of the chat agent; each docstring is the prompt the model reads.

The user is always `ctx.deps.user_id`: no tool takes a user argument, so the model cannot reach
another user's data whatever it sends (ids of other users look exactly like missing ids).
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import date
from typing import Any

from pydantic_ai import FunctionToolset, ModelRetry, RunContext

from agent.chat.deps import TurnDeps, refused_change
from agent.core.errors import FactRejectedError, RecallInputError, RecallNotFoundError
from agent.memory.facts import clean_fact
from agent.search.get import MessagesOut
from agent.search.search import SearchHit

_SUMMARY_FIELDS = ("kind", "day_label", "day_segment_id", "summary_snippet", "score")
_MESSAGE_FIELDS = (
    "kind",
    "day_label",
    "day_segment_id",
    "message_id",
    "role",
    "speaker",
    "sent_at",
    "when",
    "snippet",
    "previous_turn",
    "next_turn",
    "covered_by_summary",
    "group",
    "score",
)
# Left out of a result when empty (a day's first or last message has no neighbour on that side).
_OPTIONAL_FIELDS = ("when", "previous_turn", "next_turn", "group")


# The chat agent's tools (agent/chat/agent.py gives them to the agent).
recall_tools: FunctionToolset[TurnDeps] = FunctionToolset()

# Ids are 64-bit in both databases; a larger number would fail in the driver, not as a tool error.
MAX_ID = 2**63 - 1
# About a hundred years: more is "everything", and date arithmetic overflows long before a million.
MAX_RECENCY_DAYS = 36_500


def _checked_id(name: str, value: int | None) -> int | None:
    """An id argument the database can look up, or a retry the model can act on."""
    if value is not None and not 1 <= value <= MAX_ID:
        raise ModelRetry(f"{name} must be an id from a search result (a positive number), got {value}")
    return value


# A fact a tool writes stands on what the person said this turn (agent/memory/grounding.py).
NOT_THEIRS = (
    "not saved: a fact is saved only from the person's own words in this message (in a group, the "
    "words of the member the fact names, written with their name)"
)


async def said_here(ctx: RunContext[TurnDeps], fact: str) -> tuple[int, ...] | None:
    """The person's message this turn answers, when the fact can stand on it; None otherwise."""
    facts = ctx.deps.facts
    if facts is None:
        return None
    return await facts.grounded(
        ctx.deps.user_id, fact, conversation_id=ctx.deps.conversation_id, message_id=ctx.deps.message_id
    )


def hit_dict(hit: SearchHit) -> dict[str, Any]:
    """The output fields of one result (summary or message)."""
    fields = _SUMMARY_FIELDS if hit.kind == "summary" else _MESSAGE_FIELDS
    values = asdict(hit)
    return {name: values[name] for name in fields if not (name in _OPTIONAL_FIELDS and values[name] is None)}


def _parse_day(day: str | None, name: str) -> date | None:
    if day is None or not day.strip():
        return None
    try:
        return date.fromisoformat(day.strip())
    except ValueError as exc:
        raise ModelRetry(f"{name} must be a date as YYYY-MM-DD, got {day!r}") from exc


@recall_tools.tool
async def conversation_search(
    ctx: RunContext[TurnDeps],
    query: str,
    day: str | None = None,
    recency_days: int | None = None,
    limit: int = 6,
    min_score: float | None = None,
    from_day: str | None = None,
    to_day: str | None = None,
) -> dict[str, Any]:
    """Search your past conversations with this person (day summaries first, then exact messages).

    Use it whenever they refer to something from before today that is not in your context
    ("remember when...", a name, a plan, a place, "what did I tell you about..."), and before
    saying you don't remember. Results of kind `summary` describe a whole day; results of kind
    `message` are single messages with their `message_id`, who said them (`speaker`), the day in
    words (`when`, e.g. "Monday, 3 weeks ago") and the turns just before and after
    (`previous_turn`, `next_turn`): usually enough to answer. For more of that day's words, call
    `conversation_get`. `covered_by_summary` means the day's summary already covers it. Dates in
    the query ("last May", "three weeks ago", "on 9 March") favour messages of those days.
    A message with a `group` is something this person said in that group chat. A message whose
    text starts with a tag like "[ChatGPT, 12 Mar 2024] you:" is from the person's own chat with
    that other assistant, which they imported: "you" is the person, the other speaker is that
    assistant, never you; say "you told ChatGPT in March 2024 ...", never that you said it.

    Args:
        query: What to look for, in a few words (names, topics, places), in the language used;
            "I" / "my" for what the person said, "you" for what you said.
        day: Only this calendar day, as YYYY-MM-DD (the person's local day).
        recency_days: Only the last N days.
        limit: How many results (default 6, at most 20).
        min_score: Drop results scoring below this (scores are roughly 0 to 1).
        from_day: Favour messages from this day on, as YYYY-MM-DD (the person's local day), when
            the question is about a time ("in March", "before I changed jobs": a day you know).
        to_day: Favour messages up to this day, as YYYY-MM-DD.
    """
    recall = ctx.deps.recall
    if recall is None:
        return {"results": [], "note": "conversation search is not available right now"}
    if recency_days is not None and recency_days > MAX_RECENCY_DAYS:
        raise ModelRetry(
            f"recency_days must be at most {MAX_RECENCY_DAYS}; leave it out to search everything"
        )
    try:
        hits = await recall.search(
            ctx.deps.user_id,
            query,
            now=ctx.deps.now,
            day=_parse_day(day, "day"),
            recency_days=recency_days,
            limit=limit,
            min_score=min_score,
            before=ctx.deps.now,
            from_day=_parse_day(from_day, "from_day"),
            to_day=_parse_day(to_day, "to_day"),
        )
    except RecallInputError as exc:
        raise ModelRetry(str(exc)) from exc
    results = [hit_dict(h) for h in hits]
    if not results:
        return {"results": [], "note": "nothing found; try other words or a wider time range"}
    return {"results": results}


@recall_tools.tool
async def conversation_get(
    ctx: RunContext[TurnDeps],
    message_id: int | None = None,
    day_segment_id: int | None = None,
    from_message_id: int | None = None,
    to_message_id: int | None = None,
) -> dict[str, Any]:
    """Read exact past messages, or a day's summary, found with `conversation_search`.

    Give exactly one of:
    - `message_id`: that one message;
    - `day_segment_id`: that day's summary and its first and last message ids;
    - `day_segment_id` with `from_message_id` and `to_message_id`: the messages of that day in
      that id range, oldest first (for the words around a search hit, take a few ids either side).

    Args:
        message_id: A message id from a search result.
        day_segment_id: A day segment id from a search result.
        from_message_id: First message id of the range (inclusive).
        to_message_id: Last message id of the range (inclusive).
    """
    recall = ctx.deps.recall
    if recall is None:
        return {"note": "conversation history is not available right now"}
    try:
        out = await recall.get(
            ctx.deps.user_id,
            message_id=_checked_id("message_id", message_id),
            day_segment_id=_checked_id("day_segment_id", day_segment_id),
            from_message_id=_checked_id("from_message_id", from_message_id),
            to_message_id=_checked_id("to_message_id", to_message_id),
        )
    except (RecallInputError, RecallNotFoundError) as exc:
        raise ModelRetry(str(exc)) from exc
    if isinstance(out, MessagesOut):
        document: dict[str, Any] = {"messages": [m.shown() for m in out.messages]}
        if out.truncated:
            document["note"] = "more messages in this range; ask for the rest from the last id shown"
        return document
    return asdict(out)


@recall_tools.tool
async def memory_search(ctx: RunContext[TurnDeps], query: str, limit: int = 8) -> dict[str, Any]:
    """Look up durable facts you saved about this person (job, family, preferences, standing requests).

    Use it for lasting facts and preferences; for what was said in a past conversation use
    `conversation_search` instead.

    Args:
        query: The fact you are looking for, in a few words; empty for the most recent facts.
        limit: How many facts (default 8).
    """
    facts = ctx.deps.facts
    if facts is None:
        return {"facts": [], "note": "memory is not available right now"}
    if limit < 1:
        raise ModelRetry("limit must be at least 1")
    hits = await facts.search(ctx.deps.user_id, query, limit=min(limit, 50), now=ctx.deps.now)
    return {"facts": [asdict(h) for h in hits]}


@recall_tools.tool
async def memory_add(ctx: RunContext[TurnDeps], fact: str) -> dict[str, Any]:
    """Save one durable fact about this person to long-term memory.

    Only when they ask you to remember something, or for a clearly lasting, non-sensitive fact
    or preference ("works as a nurse", "is vegetarian", "wants replies in French"). One short
    sentence in the third person. Never save chat excerpts, guesses, passing moods, or
    sensitive details (health, money, passwords) unless they explicitly ask you to.

    Args:
        fact: The fact as one short sentence, e.g. "Has a cat named Miso".
    """
    facts = ctx.deps.facts
    if facts is None:
        return {"saved": False, "note": "memory is not available right now"}
    try:
        text = clean_fact(fact, max_chars=facts.settings.memory_fact_max_chars)
    except FactRejectedError as exc:
        raise ModelRetry(str(exc)) from exc
    sources = await said_here(ctx, text)
    if sources is None:
        return {"saved": False, "note": NOT_THEIRS}
    added = await facts.add(
        ctx.deps.user_id, text, conversation_id=ctx.deps.conversation_id, at=ctx.deps.now, message_ids=sources
    )
    return {"saved": added.created, "fact_id": added.fact_id, "already_known": not added.created}


@recall_tools.tool
async def memory_forget(ctx: RunContext[TurnDeps], fact: str, reason: str) -> dict[str, Any]:
    """Forget a remembered fact this person takes back or wants forgotten ("forget that I have a
    cat", "I don't have a cat"). The conversation itself stays; the fact is no longer remembered.

    Args:
        fact: The fact as you remember it, in a few words, e.g. "has a cat".
        reason: Why, in a few words, e.g. "they asked me to forget it", "it was wrong".
    """
    if (refused := refused_change(ctx.deps)) is not None:
        return refused
    facts = ctx.deps.facts
    if facts is None:
        return {"forgotten": [], "note": "memory is not available right now"}
    gone = await facts.take_back(ctx.deps.user_id, fact, reason=reason, at=ctx.deps.now)
    if not gone:
        return {"forgotten": [], "note": "no remembered fact matches; memory_search shows how it is worded"}
    return {"forgotten": gone}


@recall_tools.tool
async def memory_correct(ctx: RunContext[TurnDeps], wrong: str, correct: str) -> dict[str, Any]:
    """Correct a remembered fact that is wrong or out of date ("that's wrong, I moved to Porto"):
    the old fact is no longer remembered and the corrected one is saved.

    Args:
        wrong: The fact as you remember it, in a few words, e.g. "lives in Lisbon".
        correct: The corrected fact as one short sentence in the third person, e.g. "Lives in Porto".
    """
    if (refused := refused_change(ctx.deps)) is not None:
        return refused
    facts = ctx.deps.facts
    if facts is None:
        return {"corrected": False, "note": "memory is not available right now"}
    try:
        text = clean_fact(correct, max_chars=facts.settings.memory_fact_max_chars)
    except FactRejectedError as exc:
        raise ModelRetry(str(exc)) from exc
    sources = await said_here(ctx, text)
    if sources is None:
        return {"corrected": False, "note": NOT_THEIRS}
    gone, added = await facts.correct(
        ctx.deps.user_id,
        wrong,
        text,
        conversation_id=ctx.deps.conversation_id,
        at=ctx.deps.now,
        message_ids=sources,
    )
    return {"corrected": True, "forgotten": gone, "saved": text, "fact_id": added.fact_id}
