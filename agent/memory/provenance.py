"""Where a fact comes from, as the person may see it: their own lines (quoted briefly, dated in their
time zone; a line of a chat they imported as "you told ChatGPT on ..."), "you asked me to remember
this", "said in a call", or that no source is left.

`/memory`, the Mini App's "What I remember" and the `memory_sources` tool all read it here, through
one repository read (`TranscriptRepository.said_lines`) that is walled in its query: only the owner's
transcript (a group's lines for a group's fact, the person's private lines for theirs), only lines a
person wrote, never the companion's, and never a line that was blanked. A fact whose lines were all
forgotten or deleted, or that never named any, has no source left and says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import is_group
from agent.history.imported import IMPORTED_LINE, Source, imported_sources, source_name
from agent.memory.corrections import named_by
from db.models import User, UserFact
from db.repositories.facts import FactRepository
from db.repositories.transcript import SaidLine, TranscriptRepository

Origin = Literal["said", "asked", "call"]
# How a fact came to be known, by who wrote it (`UserFact.source`).
ORIGINS: dict[str, Origin] = {"extraction": "said", "import": "said", "tool": "asked", "voice": "call"}
# A source line is quoted this briefly (a line is read once, cut in the query).
QUOTE_CHARS = 200
# Lines shown per fact, earliest first; the rest are counted.
MAX_LINES = 3
# A group member's name as a source names them.
NAME_CHARS = 24
NONE_LEFT = "no source left: the messages it came from are gone"
# "asked" and "call" in a private chat and in a group.
ASKED = ("you asked me to remember this", "I was asked here to remember this")
IN_A_CALL = "said in a call"
# What the chat tool reads for each origin (and for none left).
MEANINGS = {
    "said": (
        "their own words (in a group, the member's named as `speaker`), quoted in `lines`; a line with"
        " `told` is what they told that other assistant (ChatGPT, Claude) in a chat they imported"
    ),
    "asked": "you were asked to remember it",
    "call": "said in a voice call",
    "none": "no source left: the messages it came from were forgotten or deleted",
}
MAX_EXPLAINED = 3


@dataclass(frozen=True)
class SourceLine:
    """One line the fact stands on: when it was said (in the owner's time zone), its first words,
    who said it in a group, whether it was said in a call, and the other assistant it was told to
    (a line of a chat imported from ChatGPT or Claude)."""

    message_id: int
    at: datetime
    text: str
    speaker: str | None
    in_call: bool
    told: str | None = None


@dataclass(frozen=True)
class Sources:
    """Where one fact comes from: how it came (`origin`), when it was learned (local), the lines it
    stands on (earliest first, at most `MAX_LINES`) and how many more there are."""

    origin: Origin
    learned: datetime
    lines: tuple[SourceLine, ...]
    more: int

    @property
    def day(self) -> date:
        """The local day it comes from: when the person first said it, else when it was learned."""
        return (self.lines[0].at if self.lines else self.learned).date()

    @property
    def none_left(self) -> bool:
        """A fact learned from the conversation whose lines are all gone (or never were named)."""
        return self.origin == "said" and not self.lines


def clipped(text: str, chars: int) -> str:
    """The text, cut to `chars` characters with an ellipsis when longer."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def day_text(day: date) -> str:
    """A day as a person reads it: 3 May 2026."""
    return f"{day.day} {day:%b %Y}"


def _line(said: SaidLine, zone: ZoneInfo, imported: Source | None) -> SourceLine:
    speaker = clipped(said.speaker_name, NAME_CHARS) if said.speaker_name else None
    return SourceLine(
        message_id=said.id,
        at=said.sent_at.astimezone(zone),
        text=clipped(" ".join(said.text.split()), QUOTE_CHARS),
        speaker=speaker,
        in_call=said.kind == "voice",
        told=source_name(imported.kind) if imported is not None else None,
    )


async def read_sources(
    session: AsyncSession, owner_id: int, facts: Sequence[UserFact], zone: ZoneInfo
) -> dict[int, Sources]:
    """Each of the owner's facts' sources, by fact id: one read of the owner's transcript."""
    # One character past the quote, so a longer line is cut with its ellipsis.
    said = await TranscriptRepository(session).said_lines(
        owner_id, (int(m) for f in facts for m in f.message_ids or []), chars=QUOTE_CHARS + 1
    )
    imported_ids = [i for i, line in said.items() if line.kind == IMPORTED_LINE]
    imported = await imported_sources(session, owner_id, imported_ids) if imported_ids else {}
    found: dict[int, Sources] = {}
    for fact in facts:
        lines = sorted(
            (said[int(m)] for m in set(fact.message_ids or []) if int(m) in said),
            key=lambda line: (line.sent_at, line.id),
        )
        found[fact.id] = Sources(
            origin=ORIGINS.get(fact.source, "said"),
            learned=fact.created_at.astimezone(zone),
            lines=tuple(_line(line, zone, imported.get(line.id)) for line in lines[:MAX_LINES]),
            more=max(0, len(lines) - MAX_LINES),
        )
    return found


def _said(line: SourceLine, *, group: bool, quote_chars: int) -> str:
    who = line.speaker or ("someone here" if group else "you")
    if line.told is not None:
        return f"{who} told {line.told} on {day_text(line.at.date())}: “{clipped(line.text, quote_chars)}”"
    where = " in a call" if line.in_call else ""
    return f"{who} said{where} on {day_text(line.at.date())}: “{clipped(line.text, quote_chars)}”"


def source_text(sources: Sources, *, group: bool = False, quote_chars: int = QUOTE_CHARS) -> str:
    """One line saying where a fact comes from, its first line quoted at most `quote_chars` long."""
    parts: list[str] = []
    if sources.origin == "asked":
        parts.append(ASKED[group])
    elif sources.origin == "call" and not sources.lines:
        parts.append(f"{IN_A_CALL} on {day_text(sources.learned.date())}")
    if sources.lines:
        first, others = sources.lines[0], len(sources.lines) - 1 + sources.more
        again = f" (and {others} more time{'s' if others > 1 else ''})" if others else ""
        parts.append(_said(first, group=group, quote_chars=quote_chars) + again)
    elif sources.origin == "asked":
        parts[-1] += f" on {day_text(sources.learned.date())}"
    if sources.none_left:
        parts.append(NONE_LEFT)
    return "; ".join(parts)


def sources_dict(sources: Sources, *, group: bool = False) -> dict[str, Any]:
    """A fact's sources as JSON (the Mini App's API and the chat tool read the same shape)."""
    return {
        "origin": "none" if sources.none_left else sources.origin,
        "says": source_text(sources, group=group),
        "learned": sources.learned.isoformat(timespec="minutes"),
        "lines": [
            {
                "text": line.text,
                "at": line.at.isoformat(timespec="minutes"),
                "day": line.at.date().isoformat(),
                **({"speaker": line.speaker} if line.speaker else {}),
                **({"in_call": True} if line.in_call else {}),
                **({"told": line.told} if line.told else {}),
            }
            for line in sources.lines
        ],
        "more": sources.more,
    }


@dataclass(frozen=True)
class Explained:
    """One held fact and where it comes from (the chat tool's answer to "why do you think that?")."""

    fact_id: int
    content: str
    sources: Sources
    group: bool

    def as_dict(self) -> dict[str, Any]:
        """The fact, its id, what its origin means and its sources, as the chat tool returns them."""
        origin = "none" if self.sources.none_left else self.sources.origin
        return {
            "fact_id": self.fact_id,
            "fact": self.content,
            "meaning": MEANINGS[origin],
            **sources_dict(self.sources, group=self.group),
        }


async def explain(
    sessions: async_sessionmaker[AsyncSession],
    owner_id: int,
    zone: ZoneInfo,
    *,
    fact_id: int | None = None,
    about: str = "",
) -> list[Explained]:
    """The owner's held fact with this id, or the few their words name best, each with its sources;
    empty when the owner holds none of them (another owner's id finds nothing)."""
    async with sessions() as session:
        owner = await session.get(User, owner_id)
        group = owner is not None and is_group(owner)
        repository = FactRepository(session)
        if fact_id is not None:
            one = await repository.held_one(owner_id, fact_id)
            chosen = [one] if one is not None else []
        else:
            held = await repository.held(owner_id)
            by_id = {f.id: f for f in held}
            chosen = [by_id[m.fact_id] for m in named_by(about, held) if m.fact_id in by_id]
            chosen = chosen[:MAX_EXPLAINED]
        sources = await read_sources(session, owner_id, chosen, zone)
    return [Explained(f.id, f.content, sources[f.id], group) for f in chosen]
