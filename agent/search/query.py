"""The inputs and results of conversation_search, and the small helpers both rankings share."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

import numpy as np

from agent.search.dates import DayRange
from agent.search.fts import STOPWORDS
from agent.search.turns import Neighbour
from agent.search.vectors import UserVectors

_NAME_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class SearchHit:
    """One result: a day summary or a transcript message."""

    kind: Literal["summary", "message"]
    day_label: str
    day_segment_id: int | None
    score: float
    message_id: int | None = None
    snippet: str | None = None
    covered_by_summary: bool | None = None
    summary_snippet: str | None = None
    role: str | None = None
    sent_at: str | None = None
    # Who said it, the day in words ("Monday, 3 weeks ago"), and the turns either side of it.
    speaker: str | None = None
    when: str | None = None
    previous_turn: Neighbour | None = None
    next_turn: Neighbour | None = None
    # The group's title when this is the searcher's own line in a group (GROUP_RECALL_OWN_WORDS).
    group: str | None = None


@dataclass(frozen=True)
class SearchQuery:
    """Validated inputs of one search."""

    text: str
    day: date | None
    since: datetime | None
    limit: int
    min_score: float | None
    # Messages at or after this time are left out: the turn's own question is not a memory.
    before: datetime | None = None
    # The conversation's two names (user, persona): left out of the lexical side for messages.
    speakers: tuple[str, ...] = ()
    # The searcher's today (the user's calendar day): reads "last May", labels hits "3 weeks ago".
    today: date | None = None
    # The user's language (`users.language`): how full text matches the query's words.
    language: str | None = None
    # Days the caller names (the search tool's from_day / to_day), favoured like the days the
    # query's own words name.
    days: tuple[DayRange, ...] = ()


def without_speakers(text: str, speakers: tuple[str, ...]) -> str:
    """The query without the speakers' names, unless only stopwords would be left.

    Every message is said by one of the two, so their names tell the lexical side nothing (the
    vector side sees them: messages are embedded as "<name>: <text>"); a message holding a name
    is mostly a greeting ("Hey Anna!"), which would outrank the answer.
    """
    names = {w.lower() for name in speakers for w in _NAME_WORD.findall(name)}
    kept = [w for w in _NAME_WORD.findall(text) if w.lower() not in names]
    return " ".join(kept) if any(w.lower() not in STOPWORDS for w in kept) else text


def make_snippet(content: str, terms: list[str], width: int) -> str:
    """The passage of `width` characters holding the most distinct query terms (the first such;
    the start when none is found): of a long answer, the part that matched, not its opening."""
    flat = " ".join(content.split())
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    found = sorted((p, t) for t in dict.fromkeys(terms) for p in _occurrences(lower, t))
    # Windows start a third of a width before each occurrence, in order: two pointers count the
    # terms inside each one.
    best, start, first, last = 0, 0, 0, 0
    inside: dict[str, int] = {}
    for position, _ in found:
        left = max(0, min(position - width // 3, len(flat) - width))
        while last < len(found) and found[last][0] + len(found[last][1]) <= left + width:
            inside[found[last][1]] = inside.get(found[last][1], 0) + 1
            last += 1
        while first < last and found[first][0] < left:
            term = found[first][1]
            inside[term] -= 1
            if not inside[term]:
                del inside[term]
            first += 1
        if len(inside) > best:
            best, start = len(inside), left
    start = min(start, len(flat) - width)
    text = flat[start : start + width].strip()
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(flat) else "")


def _occurrences(text: str, term: str, most: int = 50) -> list[int]:
    """Where `term` starts in `text` (at most `most` places: a bound for very long messages)."""
    places: list[int] = []
    at = text.find(term) if term else -1
    while at >= 0 and len(places) < most:
        places.append(at)
        at = text.find(term, at + 1)
    return places


def sort_key(hit: SearchHit, day_ordinal: int) -> tuple[float, int, int]:
    """Best score first; ties: newer day, then newer message."""
    return (-hit.score, -day_ordinal, -(hit.message_id or 0))


def allowed_rows(vectors: UserVectors, query: SearchQuery, segment: int | None) -> np.ndarray:
    """The vector rows the query's day and recency filters let through."""
    mask = np.ones(vectors.size, dtype=bool)
    if segment is not None:
        mask &= vectors.day_segment_ids == segment
    if query.since is not None:
        mask &= vectors.last_sent >= query.since.timestamp()
    return mask


def recency_start(now: datetime, recency_days: int | None) -> datetime | None:
    """The earliest time a `recency_days` filter keeps."""
    return None if recency_days is None else now - timedelta(days=recency_days)
