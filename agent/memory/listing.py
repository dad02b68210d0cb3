"""What a person sees of what the bot knows about them (/memory, the Mini App's "What I remember"),
and the changes they make to one fact there or in chat: pin, hide, reword, forget.

The listing is the profile exactly as the prompt gets it (`choose_profile` over the same held facts,
with the same budget), then the rest of the held facts: those the budget left out (recalled when
relevant), the hidden ones ("don't bring this up": kept and found when asked about, never in the
profile nor recalled unasked) and plans whose date has passed; each fact with where it comes from
(agent/memory/provenance.py). Every read and change goes through `FactRepository`, scoped by the
owner's id, so another owner's fact id finds nothing. A group's listing is the group's own facts
(its owner row), never a member's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.errors import FactRejectedError
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.memory.profile import Section, choose_profile, in_effect, section_of
from agent.memory.provenance import QUOTE_CHARS, Sources, clipped, read_sources, source_text
from db.models import UserFact
from db.repositories.facts import FactRepository

Standing = Literal["profile", "recalled", "hidden", "past"]
Flag = Literal["pin", "unpin", "hide", "show"]

# PROFILE_TOKENS' default: the profile's share of every prompt.
DEFAULT_PROFILE_TOKENS = 700
# Facts listed after the profile (a person holds hundreds at most; the rest are counted, not shown).
MAX_LISTED = 500
# Each flag as (pinned, hidden); None leaves that one as it is. A pinned fact is one to bring up
# first, a hidden one never: pinning shows a hidden fact, hiding unpins a pinned one.
FLAGS: dict[Flag, tuple[bool | None, bool | None]] = {
    "pin": (True, False),
    "unpin": (False, None),
    "hide": (False, True),
    "show": (None, False),
}
# Who wrote a fact, as the person reads it.
SOURCES = {
    "extraction": "from our conversations",
    "tool": "you asked me to remember",
    "voice": "from our calls",
}


@dataclass(frozen=True)
class Listed:
    """One held fact as the person sees it: where it stands, its flags, the local day it comes from
    and its sources (the person's lines, or how else it came)."""

    id: int
    content: str
    source: str
    section: Section
    day: date
    pinned: bool
    hidden: bool
    standing: Standing
    sources: Sources


@dataclass(frozen=True)
class Listing:
    """The profile as the bot reads it, then the rest; `more` counts held facts past the list."""

    profile: tuple[Listed, ...]
    rest: tuple[Listed, ...]
    more: int
    tokens: int
    budget: int

    @property
    def facts(self) -> tuple[Listed, ...]:
        """Every listed fact, profile first, in the order they are shown."""
        return self.profile + self.rest


def profile_tokens(settings: Settings) -> int:
    """The profile's token budget (PROFILE_TOKENS), the one the prompt's profile is chosen with."""
    return int(getattr(settings, "profile_tokens", DEFAULT_PROFILE_TOKENS))


def _rest(facts: Sequence[UserFact], left_out: Iterable[UserFact], now: datetime) -> list[UserFact]:
    """After the profile: what the budget left out (in the order it would come in), then the hidden
    facts, then past plans, each newest first."""
    newest = sorted(facts, key=lambda f: -f.id)
    hidden = [f for f in newest if f.hidden]
    past = [f for f in newest if not f.hidden and not in_effect(f, now)]
    return [*left_out, *hidden, *past]


def _standing(fact: UserFact, in_profile: bool, now: datetime) -> Standing:
    if in_profile:
        return "profile"
    if fact.hidden:
        return "hidden"
    return "recalled" if in_effect(fact, now) else "past"


async def read_listing(
    session: AsyncSession,
    owner_id: int,
    *,
    now: datetime,
    zone: ZoneInfo,
    budget_tokens: int,
    count: Callable[[str], int] | None = None,
    limit: int = MAX_LISTED,
) -> Listing:
    """The owner's listing: the profile chosen as the prompt chooses it, then at most `limit` more."""
    facts = await FactRepository(session).held(owner_id)
    profile = choose_profile(facts, budget_tokens=budget_tokens, count=count or get_counter().count, now=now)
    by_id = {f.id: f for f in facts}
    chosen = [by_id[f.id] for f in profile.facts]
    rest = _rest(facts, [by_id[f.id] for f in profile.left_out], now)
    shown = [*chosen, *rest[:limit]]
    sources = await read_sources(session, owner_id, shown, zone)

    def listed(fact: UserFact, in_profile: bool) -> Listed:
        return Listed(
            id=fact.id,
            content=fact.content,
            source=SOURCES.get(fact.source, fact.source),
            section=section_of(fact),
            day=sources[fact.id].day,
            pinned=fact.pinned,
            hidden=fact.hidden,
            standing=_standing(fact, in_profile, now),
            sources=sources[fact.id],
        )

    return Listing(
        profile=tuple(listed(f, True) for f in chosen),
        rest=tuple(listed(f, False) for f in rest[:limit]),
        more=max(0, len(rest) - limit),
        tokens=profile.tokens,
        budget=budget_tokens,
    )


async def listing_of(
    sessions: async_sessionmaker[AsyncSession],
    owner_id: int,
    timezone: str,
    *,
    now: datetime,
    settings: Settings,
) -> Listing:
    """The owner's listing now, days in their time zone, the profile chosen with PROFILE_TOKENS."""
    async with sessions() as session:
        return await read_listing(
            session, owner_id, now=now, zone=ZoneInfo(timezone), budget_tokens=profile_tokens(settings)
        )


# --- the person's changes (each in its own transaction) --------------------------------------------


async def set_flag(
    sessions: async_sessionmaker[AsyncSession], owner_id: int, fact_id: int, flag: Flag, *, at: datetime
) -> UserFact | None:
    """Pin or unpin, hide or show one held fact of the owner; None when they hold no such fact."""
    pinned, hidden = FLAGS[flag]
    async with sessions() as session, session.begin():
        return await FactRepository(session).set_flags(owner_id, fact_id, at, pinned=pinned, hidden=hidden)


async def reword(
    sessions: async_sessionmaker[AsyncSession],
    owner_id: int,
    fact_id: int,
    text: str,
    *,
    at: datetime,
    max_chars: int,
) -> UserFact | None:
    """Give one held fact of the owner the person's own words (FactRejectedError when empty or too
    long); the fact that now holds them, or None when they hold no such fact."""
    words = " ".join(text.split())
    if not words:
        raise FactRejectedError("the new wording is empty: write the fact in a few words")
    if len(words) > max_chars:
        raise FactRejectedError(f"a fact holds at most {max_chars} characters; this one has {len(words)}")
    async with sessions() as session, session.begin():
        return await FactRepository(session).reword(owner_id, fact_id, words, at)


# --- as plain text (/memory, the terminal chat) ----------------------------------------------------

# Each standing's heading, as a person reads it and as a group does.
HEADINGS: dict[Standing, tuple[str, str]] = {
    "profile": (
        "In your profile, which I read every time we talk:",
        "In this group's profile, which I read whenever I answer here:",
    ),
    "recalled": ("Recalled when relevant (no room left in the profile):",) * 2,
    "hidden": (
        "Kept, but I don't bring these up unless you ask:",
        "Kept, but I don't bring these up unless asked:",
    ),
    "past": ("Plans whose date has passed:",) * 2,
}
PINNED_MARK = "📌 "
SOURCE_MARK = "   ↳ "


def listing_lines(
    facts: Sequence[Listed],
    *,
    first_number: int = 1,
    group: bool = False,
    line_chars: int = 400,
    source_chars: int | None = None,
    quote_chars: int = QUOTE_CHARS,
) -> list[str]:
    """Numbered lines of these facts, under the heading of each standing they come to; with
    `source_chars`, each fact followed by where it comes from, cut to that many characters."""
    lines: list[str] = []
    standing: Standing | None = None
    for number, fact in enumerate(facts, start=first_number):
        if fact.standing != standing:
            standing = fact.standing
            lines += [*([""] if lines else []), HEADINGS[standing][group]]
        mark = PINNED_MARK if fact.pinned else ""
        lines.append(f"{number}. {mark}{clipped(fact.content, line_chars)}")
        if source_chars is not None:
            said = source_text(fact.sources, group=group, quote_chars=quote_chars)
            lines.append(SOURCE_MARK + clipped(said, source_chars))
    return lines
