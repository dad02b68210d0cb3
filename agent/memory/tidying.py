"""What one consolidation changes in an owner's facts: a plan, checked before anything is written.

The plan starts from what needs no model (plans whose date has passed are retired, exact and near
duplicates merged: agent/memory/duplicates.py), then takes the summary model's answer, which may
only name the facts it was shown (the owner's own held facts; any other id is ignored). A pinned
fact is never superseded or retired: among duplicates it is the one kept, and a later fact that
contradicts it becomes a question for the person instead (both kept, see `Question`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, get_args
from zoneinfo import ZoneInfo

from agent.core.clock import ensure_utc
from agent.memory.duplicates import Candidate, group_duplicates, words
from db.models import UserFact

Section = Literal["identity", "people", "health", "preference", "plan", "other"]
SECTIONS: frozenset[str] = frozenset(get_args(Section))
_PLAN_CATEGORIES = frozenset({"plan", "plans"})


@dataclass(frozen=True)
class Held:
    """A held fact as the consolidation saw it (what is compared again before writing)."""

    id: int
    content: str
    pinned: bool
    hidden: bool
    category: str | None
    reinforced: int
    last_seen: datetime
    valid_until: datetime | None

    @classmethod
    def of(cls, fact: UserFact) -> Held:
        """The snapshot of a stored fact."""
        return cls(
            id=fact.id,
            content=fact.content,
            pinned=fact.pinned,
            hidden=fact.hidden,
            category=fact.category,
            reinforced=fact.reinforced,
            last_seen=ensure_utc(fact.last_seen_at or fact.created_at),
            valid_until=ensure_utc(fact.valid_until) if fact.valid_until is not None else None,
        )

    def same_as(self, fact: UserFact) -> bool:
        """Whether the stored fact still reads as it did (its words and the person's flags)."""
        return (self.content, self.pinned, self.hidden) == (fact.content, fact.pinned, fact.hidden)


@dataclass(frozen=True)
class Question:
    """A later fact contradicting a pinned one: both are kept and the person is asked which holds."""

    pinned: Held
    newer: Held

    def text(self) -> str:
        """The open question the next conversations' context carries."""
        return (
            f"Ask them which holds now: they pinned \u201c{self.pinned.content}\u201d, and later "
            f"\u201c{self.newer.content}\u201d was learned (they can change it with /memory)."
        )


@dataclass
class Plan:
    """The changes of one consolidation, every id one of the owner's held facts."""

    facts: dict[int, Held]
    merges: dict[int, list[int]] = field(default_factory=dict)  # kept id -> ids said again
    supersessions: list[tuple[int, int]] = field(default_factory=list)  # (older, newer)
    retirements: list[int] = field(default_factory=list)
    placements: dict[int, tuple[str | None, datetime | None]] = field(default_factory=dict)
    questions: list[Question] = field(default_factory=list)
    # Ids merged into another: the model's later mentions of them mean the one kept.
    _into: dict[int, int] = field(default_factory=dict, repr=False)

    def gone(self) -> set[int]:
        """Ids this plan takes out of the held facts."""
        return set(self._into) | {older for older, _ in self.supersessions} | set(self.retirements)

    def touched(self) -> set[int]:
        """Every id the plan changes or relies on (checked again before writing)."""
        ids = (
            self.gone() | set(self.merges) | {newer for _, newer in self.supersessions} | set(self.placements)
        )
        return ids | {i for q in self.questions for i in (q.pinned.id, q.newer.id)}

    def is_empty(self) -> bool:
        """Nothing to write."""
        return not (
            self.merges or self.supersessions or self.retirements or self.placements or self.questions
        )

    def resolve(self, fact_id: int) -> Held | None:
        """The held fact an id now stands for (a merged one's keeper); None when unknown or gone."""
        fact_id = self._into.get(fact_id, fact_id)
        if fact_id not in self.facts or fact_id in self.gone():
            return None
        return self.facts[fact_id]

    def merge(self, ids: Iterable[int], keep: int | None = None) -> None:
        """Merge facts that say the same thing: a pinned one is kept (others pinned stay as they are)."""
        found = {f.id: f for i in ids if (f := self.resolve(i)) is not None}
        if len(found) < 2:
            return
        pinned = sorted(i for i, f in found.items() if f.pinned)
        if keep not in found or (pinned and keep not in pinned):
            keep = pinned[0] if pinned else min(found)
        kept = keep
        absorbed = [i for i in sorted(found) if i != kept and not found[i].pinned]
        if not absorbed:
            return
        self.merges.setdefault(kept, []).extend(absorbed)
        for i in absorbed:
            self._into[i] = kept
            for merged in self.merges.pop(i, []):  # a keeper merged in takes its own merged along
                self.merges[kept].append(merged)
                self._into[merged] = kept

    def supersede(self, older_id: int, newer_id: int) -> None:
        """A later fact replaces an older one; a pinned older one becomes a question."""
        older, newer = self.resolve(older_id), self.resolve(newer_id)
        if older is None or newer is None or older.id == newer.id:
            return
        if self._last_seen(newer) < self._last_seen(older):
            return  # the model took the older for the newer: nothing is replaced by what came first
        if older.pinned:
            self.questions.append(Question(older, newer))
        else:
            self.supersessions.append((older.id, newer.id))

    def _last_seen(self, fact: Held) -> datetime:
        return max([fact.last_seen, *(self.facts[i].last_seen for i in self.merges.get(fact.id, []))])

    def retire(self, fact_id: int) -> None:
        """Retire a plan whose date has passed (a pinned one stays)."""
        fact = self.resolve(fact_id)
        if fact is not None and not fact.pinned:
            self.retirements.append(fact.id)

    def place(
        self, fact_id: int, section: str, plan_day: date | None, *, now: datetime, timezone: str
    ) -> None:
        """Give a fact its missing section and a plan its date (retired when the date has passed)."""
        fact = self.resolve(fact_id)
        if fact is None or section not in SECTIONS:
            return
        category = section if fact.category is None else None
        is_plan = section == "plan" if fact.category is None else fact.category.lower() in _PLAN_CATEGORIES
        until = None
        if is_plan and plan_day is not None and fact.valid_until is None:
            # The plan holds until the end of its day where the person lives.
            until = datetime.combine(plan_day + timedelta(days=1), time(), ZoneInfo(timezone)).astimezone(UTC)
            if until <= now:
                self.retire(fact.id)
                return
        if category is not None or until is not None:
            self.placements[fact.id] = (category, until)

    def shown(self) -> list[Held]:
        """The held facts left for the model to read, a keeper counting what was merged into it."""
        gone = self.gone()
        facts = []
        for fact in self.facts.values():
            if fact.id in gone:
                continue
            merged = [self.facts[i] for i in self.merges.get(fact.id, [])]
            if merged:
                said = fact.reinforced + sum(m.reinforced for m in merged)
                fact = replace(fact, reinforced=said, last_seen=self._last_seen(fact))
            facts.append(fact)
        return facts


def model_free_plan(facts: Sequence[Held], now: datetime, *, subject: Iterable[str] = ()) -> Plan:
    """What needs no model: past plans retired, exact and near duplicates merged."""
    plan = Plan({f.id: f for f in facts})
    for fact in facts:
        if fact.valid_until is not None and fact.valid_until < now:
            plan.retire(fact.id)
    gone = plan.gone()
    subject = tuple(subject)
    candidates = [
        Candidate(f.id, words(f.content, subject=subject), f.pinned, f.reinforced)
        for f in facts
        if f.id not in gone
    ]
    for keeper, others in group_duplicates(candidates):
        plan.merge([keeper.id, *(o.id for o in others)], keep=keeper.id)
    return plan
