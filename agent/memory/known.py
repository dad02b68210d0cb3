"""What extraction is shown of what is already known, and how its decision about each fact is applied.

Extraction reads the person's current facts, compact (`[fact 12] Ana lives in Lisbon`), and says
of each fact it finds whether it is new, the same as a known one, an update of one, or contradicts
one. The list is chosen within a token budget: first the facts that share words with what the
person said in the conversation (what they could be restating), then the rest in the profile's
order (who they are first: "I moved to Porto" shares no word with "lives in Lisbon").

Applying a decision trusts no id: "same" reinforces the named fact, "update" and "contradiction"
store the new fact and supersede the named one (kept, with when and why), each only when the id
is one of the owner's held facts; any other id is ignored and the fact is stored as new. A pinned
fact is never superseded here: both are kept, and tidying asks the person which holds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Literal
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from agent.memory.profile import SECTIONS, ProfileFact, section_of
from agent.memory.words import fact_words
from db.repositories.facts import FactRepository

Relation = Literal["new", "same", "update", "contradiction"]
# The fewest tokens a known fact's line takes ("- [fact 12] Ana cooks" and its newline).
MIN_LINE_TOKENS = 8
REASONS = {
    "update": "updated by a later fact the person said",
    "contradiction": "contradicted by a later fact the person said",
}


@dataclass(frozen=True)
class ShownFact:
    """A held fact as extraction is shown it."""

    id: int
    content: str


def known_line(fact: ShownFact) -> str:
    """One known fact as extraction reads it."""
    return f"- [fact {fact.id}] {' '.join(fact.content.split())}"


def choose_known(
    facts: Sequence[ProfileFact],
    said: Sequence[str],
    *,
    budget_tokens: int,
    count: Callable[[str], int],
    language: str | None = None,
) -> list[ShownFact]:
    """The known facts to show, within the budget: those sharing words with what was said first."""
    if budget_tokens <= 0 or not facts:
        return []
    words = set().union(*(fact_words(text, language) for text in said)) if said else set()
    order = {section: index for index, section in enumerate(SECTIONS)}
    held = [fact_words(fact.content, language) for fact in facts]
    # A word many facts hold ("learning", the person's name) says little about which one is meant.
    spread = Counter(word for fact in held for word in fact)

    def rank(position: int) -> tuple[float, int, int]:
        shared = sum(1 / spread[word] for word in held[position] & words)
        return (-shared, order[section_of(facts[position])], position)

    chosen: list[ShownFact] = []
    left = budget_tokens
    for position in sorted(range(len(facts)), key=rank):
        if left < MIN_LINE_TOKENS:
            break  # no fact fits in what is left
        known = ShownFact(facts[position].id, facts[position].content)
        cost = count(known_line(known)) + 1
        if cost > left:
            continue  # a shorter one after it may still fit
        chosen.append(known)
        left -= cost
    return sorted(chosen, key=lambda k: k.id)


def plan_until(day: str | None, timezone: str) -> datetime | None:
    """A plan's local day ("2026-12-04") as the last moment of that day, in UTC; None when unreadable."""
    try:
        local = date.fromisoformat(day.strip()) if day else None
    except ValueError:
        return None
    if local is None:
        return None
    return datetime.combine(local, time.max, tzinfo=ZoneInfo(timezone)).astimezone(UTC)


@dataclass(frozen=True)
class Decided:
    """A grounded fact and what extraction decided about it against the known facts."""

    text: str
    message_ids: Sequence[int]
    category: str | None = None
    valid_until: datetime | None = None
    relation: Relation = "new"
    known_id: int | None = None


@dataclass
class Applied:
    """What applying the decisions did."""

    created: int = 0
    reinforced: int = 0
    superseded: int = 0
    ignored_ids: int = 0

    def counts(self) -> dict[str, int]:
        """As the pipeline's counts."""
        return {
            "facts": self.created,
            "facts_reinforced": self.reinforced,
            "facts_superseded": self.superseded,
            "known_ids_ignored": self.ignored_ids,
        }


async def apply_decisions(
    session: AsyncSession,
    owner_id: int,
    conversation_id: int | None,
    facts: Sequence[Decided],
    at: datetime,
    *,
    source: str,
) -> Applied:
    """Store the facts as decided (the caller commits): see the module's docstring."""
    repository = FactRepository(session)
    named = {f.known_id for f in facts if f.relation != "new" and f.known_id is not None}
    held = {i: f for i in sorted(named) if (f := await repository.held_one(owner_id, i)) is not None}
    applied = Applied()
    new: list[Decided] = []
    replacing: list[tuple[Decided, int]] = []
    for fact in facts:
        target = held.get(fact.known_id) if fact.known_id is not None else None
        if fact.relation != "new" and target is None:
            applied.ignored_ids += 1
        if fact.relation == "same" and target is not None:
            applied.reinforced += await repository.reinforce(owner_id, target.id, fact.message_ids, at)
            continue
        new.append(fact)
        if fact.relation in REASONS and target is not None and not target.pinned:
            replacing.append((fact, target.id))
    applied.created = await repository.add_sourced(
        owner_id,
        conversation_id,
        [(f.text, f.message_ids) for f in new],
        at,
        source=source,
        categories=[f.category for f in new],
        valid_until=[f.valid_until for f in new],
    )
    for fact, older in replacing:
        newer = await repository.by_content(owner_id, fact.text)
        if newer is None or newer.invalidated_at is not None or newer.id == older:
            continue
        applied.superseded += await repository.supersede(
            owner_id, [older], by=newer.id, at=at, reason=REASONS[fact.relation]
        )
    return applied
