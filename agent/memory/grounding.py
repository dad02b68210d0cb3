"""What makes a fact the person's: it stands on lines they wrote in the conversation it comes from.

Every writer of facts about a person or a group (post-processing's extraction, the chat's memory
tools, and any importer of another assistant's history) asks `ground` which of a fact's sources
count. A source counts when it is a line of this conversation written by the person: role `user`,
and in a group a line by a member the fact names (the group's facts are about its members, by
name). The companion's lines, lines of another conversation or of nobody, and in a group another
member's lines do not count. A fact left with no source that counts is not the person's: it is not
stored, and `dropped` counts it (a metric and a log line with the reasons, never the fact's words).

One exception: the companion proposed something and the person agreed ("you're a morning person,
right?" / "yes"). The writer names the person's agreeing line (`agreed_in`); when that line is
the person's, the fact stands on it.
"""

from __future__ import annotations

import logging
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.groups import GROUP
from agent.core.observability.instruments import facts_dropped
from db.models import OTHER, TranscriptMessage, User

logger = logging.getLogger(__name__)

# Why a fact is not the person's (the metric's and the log's `reason`).
UNSOURCED = "unsourced"  # it names no line at all
COMPANION = "companion"  # it stands only on the companion's lines
OTHER_ASSISTANT = "other_assistant"  # it stands only on lines, another assistant's among them, not theirs
OUTSIDE = "outside"  # it names lines that are not in this conversation
OTHER_MEMBER = "other_member"  # in a group: it stands only on lines of members it does not name
_NAME_WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass(frozen=True)
class Said:
    """A transcript line as grounding reads it: who wrote it (a group member by id and name)."""

    id: int
    role: str
    speaker_id: int | None = None
    speaker_name: str | None = None


@dataclass(frozen=True)
class Claim:
    """A fact a writer wants stored: its words, the lines it cites, and the person's agreeing line."""

    text: str
    message_ids: Sequence[int] = ()
    agreed_in: int | None = None


@dataclass(frozen=True)
class Grounded:
    """The sources that count (empty: the fact is not the person's) and, when none, why."""

    message_ids: tuple[int, ...]
    reason: str | None = None


def _name_words(name: str | None) -> set[str]:
    return {w.casefold() for w in _NAME_WORD.findall(unicodedata.normalize("NFKC", name or ""))}


def names(text: str, line: Said) -> bool:
    """Whether a group fact's words name the member who wrote the line (any word of their name)."""
    said = {w.casefold() for w in _NAME_WORD.findall(unicodedata.normalize("NFKC", text))}
    return bool(_name_words(line.speaker_name) & said)


def ground(claim: Claim, lines: Mapping[int, Said], *, group: bool = False) -> Grounded:
    """The claim's sources that are the person's own lines in this conversation (`lines`, by id)."""
    cited = [int(i) for i in dict.fromkeys(claim.message_ids)]
    if claim.agreed_in is not None:
        cited.append(int(claim.agreed_in))
    if not cited:
        return Grounded((), UNSOURCED)
    inside = [lines[i] for i in dict.fromkeys(cited) if i in lines]
    if not inside:
        return Grounded((), OUTSIDE)
    theirs = [line for line in inside if line.role == "user"]
    if not theirs:
        return Grounded((), OTHER_ASSISTANT if any(line.role == OTHER for line in inside) else COMPANION)
    if group:
        theirs = [line for line in theirs if names(claim.text, line)]
        if not theirs:
            return Grounded((), OTHER_MEMBER)
    return Grounded(tuple(sorted(line.id for line in theirs)))


async def conversation_lines(
    session: AsyncSession, owner_id: int, conversation_id: int, ids: Sequence[int]
) -> dict[int, Said]:
    """These lines of the owner's conversation (ids of other conversations or owners find nothing)."""
    if not ids:
        return {}
    rows = await session.execute(
        select(
            TranscriptMessage.id,
            TranscriptMessage.role,
            TranscriptMessage.speaker_telegram_id,
            TranscriptMessage.speaker_name,
        ).where(
            TranscriptMessage.user_id == owner_id,
            TranscriptMessage.conversation_id == conversation_id,
            TranscriptMessage.id.in_(sorted({int(i) for i in ids})),
        )
    )
    return {row[0]: Said(*row) for row in rows.all()}


def dropped(reasons: Sequence[str], *, writer: str, owner_id: int, conversation_id: int | None) -> None:
    """Count the facts that were not the person's: the metric by reason, and one log line."""
    if not reasons:
        return
    counts = Counter(reasons)
    for reason, count in counts.items():
        facts_dropped(writer, reason, count)
    logger.info(
        "facts not grounded",
        extra={
            "user_id": owner_id,
            "conversation_id": conversation_id,
            "writer": writer,
            "facts_dropped": len(reasons),
            "reasons": dict(sorted(counts.items())),
        },
    )


async def ground_in_turn(
    session: AsyncSession, owner_id: int, conversation_id: int, message_id: int | None, text: str
) -> Grounded:
    """What a fact a tool writes on the person's behalf stands on: the person's message this turn
    answers, when it is theirs (in a group, by a member the fact names)."""
    if message_id is None:
        return Grounded((), UNSOURCED)
    lines = await conversation_lines(session, owner_id, conversation_id, [message_id])
    group = await session.scalar(select(User.kind).where(User.id == owner_id)) == GROUP
    return ground(Claim(text, [message_id]), lines, group=group)
