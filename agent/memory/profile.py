"""The profile: the owner's current facts, most important first, within a token budget.

The profile is the compact list every prompt carries (`<about_them>`), chosen from the one list of
facts: what the person pinned first, then who they are (name, where they live, work), the people in
their life, health and boundaries, preferences, plans in progress, then everything else by how often
it was said and how recently. Hidden facts ("don't bring this up") and plans whose date has passed
never enter it. What does not fit is not lost: the facts tier may find it for a message, and
`left_out` says which facts they are (the context snapshot and /memory report it).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from itertools import chain
from typing import Literal, NamedTuple, Protocol

from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.bounded import BoundedCache
from agent.core.clock import ensure_utc
from db.repositories.facts import FactRepository

Section = Literal["pinned", "identity", "people", "health", "preference", "plan", "other"]
SECTIONS: tuple[Section, ...] = ("pinned", "identity", "people", "health", "preference", "plan", "other")
_SECTION_INDEX: dict[Section, int] = {section: index for index, section in enumerate(SECTIONS)}
# The categories writers use, mapped onto the profile's sections (the voice agent's and older ones too).
_CATEGORY_SECTION: dict[str, Section] = {
    "identity": "identity",
    "personal": "identity",
    "work": "identity",
    "people": "people",
    "family": "people",
    "relationship": "people",
    "health": "health",
    "boundary": "health",
    "boundaries": "health",
    "preference": "preference",
    "preferences": "preference",
    "plan": "plan",
    "plans": "plan",
}
# For facts written without a category: a few plain words say which section a fact belongs to (a
# relative named first: "her sister is called Ana" is about the people in their life).
_GUESSES: tuple[tuple[Section, re.Pattern[str]], ...] = (
    (
        "people",
        re.compile(
            r"\b(wife|husband|partner|boyfriend|girlfriend|mother|mom|mum|father|dad|sister|brother|"
            r"son|daughter|kids?|children|friend|colleague|grandma|grandpa|family)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "identity",
        re.compile(
            r"\b(name|called|lives?|living|moved|born|from|works?|working|job|nurse|teacher|engineer|"
            r"student|studies|studying|years? old|age)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "health",
        re.compile(
            r"\b(allergic|allergy|diabetes|asthma|pregnant|illness|sick|health|therapy|medication|"
            r"vegan|vegetarian|doesn't want|does not want|don't|never)\b",
            re.IGNORECASE,
        ),
    ),
    (
        "preference",
        re.compile(r"\b(likes?|loves?|enjoys?|prefers?|hates?|dislikes?|favou?rite)\b", re.IGNORECASE),
    ),
    ("plan", re.compile(r"\b(plans?|planning|will|going to|wants to|next|interview|trip)\b", re.IGNORECASE)),
)


@lru_cache(maxsize=16_384)
def guess_section(text: str) -> Section:
    """The section a fact's words suggest, for a fact written without a category."""
    for section, words in _GUESSES:
        if words.search(text):
            return section
    return "other"


class Placed(Protocol):
    """What the profile reads of a fact in effect to place it and show it, once facts are ranked."""

    @property
    def id(self) -> int: ...
    @property
    def content(self) -> str: ...
    @property
    def category(self) -> str | None: ...
    @property
    def pinned(self) -> bool: ...


class Rankable(Placed, Protocol):
    """What the profile reads of a fact to tell whether it is in effect and to rank it: a `UserFact`."""

    @property
    def hidden(self) -> bool: ...
    @property
    def reinforced(self) -> int: ...
    @property
    def seen(self) -> datetime: ...
    @property
    def valid_until(self) -> datetime | None: ...
    @property
    def invalidated_at(self) -> datetime | None: ...


class ProfileFact(NamedTuple):
    """A fact in effect as the profile reads it: one row of `FactRepository.held_rows`, which come
    already filtered and in rank order, so only what places and shows a fact is read."""

    id: int
    content: str
    category: str | None
    pinned: bool


def section_of(fact: Placed) -> Section:
    """Where a fact goes in the profile: pinned first, else by its category, else by its words."""
    if fact.pinned:
        return "pinned"
    if fact.category and (known := _CATEGORY_SECTION.get(fact.category.lower())) is not None:
        return known
    return guess_section(fact.content)


def in_effect(fact: Rankable, now: datetime) -> bool:
    """A held fact the profile may show: not hidden, and not a plan whose date has passed (the
    filter `FactRepository.held_rows` applies in SQL)."""
    if fact.hidden or fact.invalidated_at is not None:
        return False
    return fact.valid_until is None or ensure_utc(fact.valid_until) >= now


def _recency(fact: Rankable) -> tuple[int, datetime, int]:
    # Sorted from the largest: the most reinforced, then the most recently said, then the newest
    # (the order `FactRepository.held_rows` reads them in).
    seen = fact.seen
    return fact.reinforced, seen if seen.tzinfo is not None else seen.replace(tzinfo=UTC), fact.id


def profile_line(fact: Placed) -> str:
    """One fact as the profile shows it."""
    return " ".join(fact.content.split())


@dataclass(frozen=True)
class Profile:
    """The facts chosen for the profile, in the order the model reads them, and those left out."""

    facts: tuple[Placed, ...]
    left_out: tuple[Placed, ...]
    tokens: int

    @property
    def ids(self) -> frozenset[int]:
        """The ids of the facts in the profile."""
        return frozenset(f.id for f in self.facts)

    def lines(self) -> tuple[str, ...]:
        """The profile's lines."""
        return tuple(profile_line(f) for f in self.facts)


def choose_profile(
    facts: Sequence[Rankable], *, budget_tokens: int, count: Callable[[str], int], now: datetime
) -> Profile:
    """The profile from the owner's held facts: in section order, each section by reinforcement then
    recency, taken while the budget lasts (a fact too long for what is left is skipped, not cut)."""
    ranked = sorted((f for f in facts if in_effect(f, now)), key=_recency, reverse=True)
    return choose_ranked(ranked, budget_tokens=budget_tokens, count=count)


def choose_ranked(facts: Iterable[Placed], *, budget_tokens: int, count: Callable[[str], int]) -> Profile:
    """`choose_profile` for facts in effect, already ranked as a section ranks them (most reinforced,
    then most recently said, then newest), as `FactRepository.held_rows` reads them: only the
    sections are left to order, a stable partition rather than a sort."""
    sections: list[list[Placed]] = [[] for _ in SECTIONS]
    for fact in facts:
        sections[_SECTION_INDEX[section_of(fact)]].append(fact)
    chosen: list[Placed] = []
    left: list[Placed] = []
    used = 0
    for fact in chain.from_iterable(sections):
        cost = count(profile_line(fact)) + 2  # the item's bullet and line break
        if used + cost <= budget_tokens:
            chosen.append(fact)
            used += cost
        else:
            left.append(fact)
    return Profile(tuple(chosen), tuple(left), used)


async def load_profile(
    session: AsyncSession, owner_id: int, *, anchor: datetime, budget_tokens: int, count: Callable[[str], int]
) -> Profile:
    """The owner's profile as of `anchor` (a conversation's start): the facts held now that were learned
    by then, so the text stays the same through the conversation unless a fact is taken back or changed."""
    rows = await FactRepository(session).held_rows(owner_id, in_effect_at=anchor, learned_by=anchor)
    facts = (ProfileFact(*row) for row in rows)
    return choose_ranked(facts, budget_tokens=budget_tokens, count=count)


class ProfileCache:
    """The profiles this process chose, one per owner, kept while the owner's facts, the conversation's
    start and the budget stay the same: a conversation's later turns read one small aggregate, not every
    fact (LRU by owners)."""

    def __init__(self, *, max_owners: int) -> None:
        self._entries: BoundedCache[int, tuple[tuple[object, ...], Profile]] = BoundedCache(
            max_entries=max_owners
        )

    def __len__(self) -> int:
        return len(self._entries)

    async def get(
        self,
        session: AsyncSession,
        owner_id: int,
        *,
        anchor: datetime,
        budget_tokens: int,
        count: Callable[[str], int],
    ) -> Profile:
        """The owner's profile as of `anchor` (see `load_profile`), chosen again when a fact changed."""
        key = (*await FactRepository(session).version(owner_id), anchor, budget_tokens)
        held = self._entries.get(owner_id)
        if held is not None and held[0] == key:
            return held[1]
        profile = await load_profile(
            session, owner_id, anchor=anchor, budget_tokens=budget_tokens, count=count
        )
        self._entries.put(owner_id, (key, profile))
        return profile

    def drop_user(self, user_id: int) -> None:
        """Drop the owner's profile (/forget: agent/account/forget.py's `UserCache`)."""
        self._entries.pop(user_id)
