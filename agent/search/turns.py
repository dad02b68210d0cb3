"""What conversation_search knows about a candidate message besides its scores: who said it, on
which day, and the turns either side of it (for rescoring, and to show with a hit).

Neighbours are the previous and next non-system messages of the same day segment, so a hit's
context never crosses into another day. Every query is scoped to one user id.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, CompoundSelect, Select, bindparam, func, select, union_all
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute, aliased

from db.models import DaySegment, TranscriptMessage

_WORD = re.compile(r"[^\W_]+")
Role = Literal["user", "assistant"]
_FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself"})
_SECOND_PERSON = frozenset({"you", "your", "yours", "yourself"})
# How a person asks the bot for something ("can you list …", "walk me through …"): the request's
# frame, not who said what it asks about.
_REQUEST = re.compile(
    r"\b(?:can|could|would|will)\s+you\b|\b(?:give|tell|walk|help|remind|show|let)\s+me\b", re.IGNORECASE
)


def by_ids(column: InstrumentedAttribute[int], ids: Collection[int]) -> ColumnElement[bool]:
    """`column IN ids`, for look-ups whose rows are then checked to belong to the user in Python.

    Putting `user_id = :user` in the same WHERE makes SQLite (no ANALYZE statistics) walk the
    user's whole (user_id, sent_at) index instead of probing the primary key: 8 ms per query at
    100,000 messages. Callers drop any row of another user, so isolation holds all the same.
    """
    return column.in_(list(ids))


@dataclass(frozen=True)
class TurnInfo:
    """A candidate message's role, calendar day and neighbouring message ids."""

    role: str
    day: date
    previous_id: int | None
    next_id: int | None


@dataclass(frozen=True)
class Neighbour:
    """The turn just before or after a hit, as shown to the model."""

    message_id: int
    speaker: str
    sent_at: str
    text: str


def _turn_columns(m: Any) -> Select[Any]:
    """A message's id, owner, role, time, day and its same-day neighbours' ids."""
    other = aliased(TranscriptMessage)
    # A day segment belongs to one user; (day_segment_id, id) is indexed (ix_transcript_day_id), so
    # each neighbour is one index probe.
    same_day = (other.day_segment_id == m.day_segment_id, other.role != "system")
    previous = select(func.max(other.id)).where(*same_day, other.id < m.id).scalar_subquery()
    following = select(func.min(other.id)).where(*same_day, other.id > m.id).scalar_subquery()
    return select(
        m.id,
        m.user_id,
        m.role,
        m.sent_at,
        DaySegment.day,
        previous.label("previous_id"),
        following.label("next_id"),
    ).outerjoin(DaySegment, DaySegment.id == m.day_segment_id)


def _turn_info_statement() -> CompoundSelect[Any]:
    """Built once: composing the aliased subqueries cost ~5 ms of Python per search.

    One round trip for the candidates and the turns that follow the `leaders` among them (the
    answer to a lexical match competes too): the followers' ids come from the first part's own
    neighbour look-up, so no second statement waits on the first.
    """
    m = aliased(TranscriptMessage)
    # The user is checked below: see `by_ids`.
    asked = _turn_columns(m).where(m.id.in_(bindparam("ids", expanding=True))).cte("asked")
    follower = aliased(TranscriptMessage)
    followers = select(asked.c.next_id).where(
        asked.c.id.in_(bindparam("leaders", expanding=True)), asked.c.next_id.is_not(None)
    )
    extra = _turn_columns(follower).where(follower.id.in_(followers), follower.id.not_in(select(asked.c.id)))
    return union_all(select(asked), extra)


_TURN_INFO = _turn_info_statement()


async def turn_info(
    session: AsyncSession, user_id: int, ids: Collection[int], *, leaders: Collection[int] = ()
) -> dict[int, TurnInfo]:
    """Role, day and same-day neighbours of each message id and of the turn after each of `leaders`
    (a subset of `ids`); ids of other users are absent."""
    if not ids:
        return {}
    rows = await session.execute(_TURN_INFO, {"ids": list(ids), "leaders": list(leaders)})
    out: dict[int, TurnInfo] = {}
    for message_id, owner, role, sent_at, day, previous_id, next_id in rows:
        if owner != user_id:
            continue  # see `by_ids`
        out[int(message_id)] = TurnInfo(
            role=str(role),
            day=day if isinstance(day, date) else sent_at.date(),
            previous_id=int(previous_id) if previous_id is not None else None,
            next_id=int(next_id) if next_id is not None else None,
        )
    return out


def named_role(query: str, *, user_name: str, persona_name: str, pronouns: bool = True) -> Role | None:
    """The one speaker a query names ("what did Anna adopt?" -> user), or else speaks of in the
    first or second person ("when does my sprint end?" -> user, "what did you suggest?" ->
    assistant; "can you list what I brought up?" -> user: a request's "can you" names no one); None
    for neither or both. Without `pronouns`, only a name names a speaker."""
    words = {w.lower() for w in _WORD.findall(_REQUEST.sub(" ", query))}

    def named(name: str) -> bool:
        parts = [w.lower() for w in _WORD.findall(name)]
        return bool(parts) and any(part in words for part in parts)

    user, persona = named(user_name), named(persona_name)
    if not user and not persona and pronouns:
        # The person's own question, relayed as they asked it: "my"/"I" are theirs, "you" the bot's.
        user, persona = bool(words & _FIRST_PERSON), bool(words & _SECOND_PERSON)
    if user == persona:
        return None
    return "user" if user else "assistant"


def speaker_name(role: str, *, user_name: str, persona_name: str) -> str:
    """Who said a message, by name."""
    if role == "user":
        return user_name or "User"
    if role == "assistant":
        return persona_name
    return role


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1].rstrip() + "…"


async def neighbours(
    session: AsyncSession,
    user_id: int,
    ids: Collection[int],
    *,
    width: int,
    names: tuple[str, str],
    before: datetime | None,
) -> dict[int, Neighbour]:
    """The given messages clipped to `width` characters, by id; none sent at or after `before`."""
    if not ids or width <= 0:
        return {}
    stmt = select(
        TranscriptMessage.id,
        TranscriptMessage.user_id,
        TranscriptMessage.role,
        TranscriptMessage.content,
        TranscriptMessage.sent_at,
        TranscriptMessage.speaker_name,
    ).where(by_ids(TranscriptMessage.id, ids))
    user_name, persona_name = names
    return {
        int(message_id): Neighbour(
            message_id=int(message_id),
            # A group's lines name their own speaker; a private chat's are the user's or the bot's.
            speaker=said_by or speaker_name(role, user_name=user_name, persona_name=persona_name),
            sent_at=sent_at.isoformat(timespec="minutes"),
            text=_clip(content, width),
        )
        for message_id, owner, role, content, sent_at, said_by in await session.execute(stmt)
        if owner == user_id and (before is None or sent_at < before)
    }
