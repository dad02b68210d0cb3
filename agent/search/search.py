"""`conversation_search` (seed 001 §5.1): summaries first, then transcript, hybrid scores.

base = vector_weight x cosine + lexical_weight x (FTS score / best FTS score of this search);
a message's cosine is that of the best embedded section holding it. Transcript hits already
covered by their day's summary are multiplied by the covered penalty. Ties: newer day, then
newer message. Every query is scoped to one user id, which callers take from the run's deps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.search.fts import STOPWORDS, FullText, query_terms
from agent.search.vectors import KIND_MESSAGES, KIND_SUMMARY, UserVectors
from agent.settings import Settings
from db.models import DaySegment, TranscriptMessage

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
    """A window of `width` characters around the first query term found (the start otherwise)."""
    flat = " ".join(content.split())
    if len(flat) <= width:
        return flat
    lower = flat.lower()
    positions = [p for p in (lower.find(t) for t in terms) if p >= 0]
    start = max(0, min(positions) - width // 3) if positions else 0
    start = min(start, len(flat) - width)
    text = flat[start : start + width].strip()
    return ("…" if start > 0 else "") + text + ("…" if start + width < len(flat) else "")


def _sort_key(hit: SearchHit, day_ordinal: int) -> tuple[float, int, int]:
    return (-hit.score, -day_ordinal, -(hit.message_id or 0))


class ConversationSearch:
    """The ranking of §5.1 over full text and (optionally) the user's vectors."""

    def __init__(self, settings: Settings, full_text: FullText) -> None:
        self.settings = settings
        self.full_text = full_text

    def weights(self, vectors_on: bool) -> tuple[float, float]:
        """(vector, lexical) weights; full text alone when embeddings are off."""
        if not vectors_on:
            return 0.0, 1.0
        return self.settings.search_vector_weight, self.settings.search_lexical_weight

    async def run(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        *,
        query_vector: np.ndarray | None,
        vectors: UserVectors | None,
    ) -> list[SearchHit]:
        """Rank summaries and messages of one user and merge them, summaries first."""
        segment_filter: int | None = None
        if query.day is not None:
            segment_filter = await session.scalar(
                select(DaySegment.id).where(DaySegment.user_id == user_id, DaySegment.day == query.day)
            )
            if segment_filter is None:
                return []
        use_vectors = query_vector is not None and vectors is not None and vectors.size > 0
        sims = (
            vectors.similarities(query_vector)
            if use_vectors and vectors and query_vector is not None
            else None
        )
        summaries = await self._summaries(session, user_id, query, segment_filter, vectors, sims)
        messages = await self._messages(session, user_id, query, segment_filter, vectors, sims)
        if query.min_score is not None:
            summaries = [h for h in summaries if h.score >= query.min_score]
            messages = [h for h in messages if h.score >= query.min_score]
        taken = summaries[: min(self.settings.search_max_summaries, query.limit)]
        return [*taken, *messages][: query.limit]

    def _allowed(self, vectors: UserVectors, query: SearchQuery, segment: int | None) -> np.ndarray:
        mask = np.ones(vectors.size, dtype=bool)
        if segment is not None:
            mask &= vectors.day_segment_ids == segment
        if query.since is not None:
            mask &= vectors.last_sent >= query.since.timestamp()
        return mask

    async def _summaries(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        segment_filter: int | None,
        vectors: UserVectors | None,
        sims: np.ndarray | None,
    ) -> list[SearchHit]:
        wv, wl = self.weights(sims is not None)
        lexical = await self.full_text.summaries(
            session, user_id, query.text, limit=self.settings.search_candidates
        )
        best = max((h.score for h in lexical), default=0.0)
        scores: dict[int, float] = {h.id: wl * h.score / best for h in lexical}
        if sims is not None and vectors is not None:
            allowed = self._allowed(vectors, query, segment_filter) & (vectors.kinds == KIND_SUMMARY)
            cosine: dict[int, float] = {}
            for row in np.flatnonzero(allowed):
                segment = int(vectors.day_segment_ids[row])
                cosine[segment] = max(cosine.get(segment, -1.0), float(sims[row]))
            for segment, value in cosine.items():
                scores[segment] = scores.get(segment, 0.0) + wv * value
        if not scores:
            return []
        stmt = select(DaySegment).where(DaySegment.user_id == user_id, DaySegment.id.in_(scores))
        if segment_filter is not None:
            stmt = stmt.where(DaySegment.id == segment_filter)
        if query.since is not None:
            stmt = stmt.where(DaySegment.last_message_at >= query.since)
        terms = query_terms(query.text)
        width = self.settings.search_snippet_chars
        hits: list[tuple[SearchHit, int]] = []
        floor = self.settings.search_summary_min_score
        for day_row in (await session.execute(stmt)).scalars():
            if not day_row.summary or scores[day_row.id] < floor:
                continue
            hit = SearchHit(
                kind="summary",
                day_label=day_row.day.isoformat(),
                day_segment_id=day_row.id,
                score=round(scores[day_row.id], 4),
                summary_snippet=make_snippet(day_row.summary, terms, width),
            )
            hits.append((hit, day_row.day.toordinal()))
        hits.sort(key=lambda pair: _sort_key(*pair))
        return [h for h, _ in hits]

    async def _messages(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        segment_filter: int | None,
        vectors: UserVectors | None,
        sims: np.ndarray | None,
    ) -> list[SearchHit]:
        wv, wl = self.weights(sims is not None)
        candidates = self.settings.search_candidates
        lexical = await self.full_text.messages(
            session,
            user_id,
            without_speakers(query.text, query.speakers),
            limit=candidates,
            day_segment_id=segment_filter,
            since=query.since,
        )
        best = max((h.score for h in lexical), default=0.0)
        lex_scores = {h.id: h.score / best for h in lexical}
        cosine: dict[int, float] = {}
        if sims is not None and vectors is not None:
            allowed = self._allowed(vectors, query, segment_filter) & (vectors.kinds == KIND_MESSAGES)
            masked = np.where(allowed, sims, -np.inf)
            # The best sections, in order, until they offer `candidates` messages (sizes vary).
            top = min(int(allowed.sum()), candidates)
            best_rows = np.argpartition(-masked, top - 1)[:top] if top > 0 else np.zeros(0, dtype=np.int64)
            for row in sorted(best_rows.tolist(), key=lambda r: -float(masked[r])):
                for message_id in vectors.section_messages[row]:
                    cosine[message_id] = max(cosine.get(message_id, -1.0), float(sims[row]))
                if len(cosine) >= candidates:
                    break
            for message_id in lex_scores:
                if message_id not in cosine:
                    rows = vectors.rows_by_message.get(message_id, [])
                    cosine[message_id] = max((float(sims[r]) for r in rows), default=0.0)
        ids = set(lex_scores) | set(cosine)
        if not ids:
            return []
        base = {i: wv * cosine.get(i, 0.0) + wl * lex_scores.get(i, 0.0) for i in ids}
        # Only the best few are read back; ranking needs no more than the limit's worth.
        keep = sorted(ids, key=lambda i: (-base[i], -i))[: max(query.limit * 3, 30)]
        stmt = (
            select(TranscriptMessage, DaySegment)
            .outerjoin(DaySegment, DaySegment.id == TranscriptMessage.day_segment_id)
            .where(TranscriptMessage.user_id == user_id, TranscriptMessage.id.in_(keep))
        )
        if segment_filter is not None:
            stmt = stmt.where(TranscriptMessage.day_segment_id == segment_filter)
        if query.since is not None:
            stmt = stmt.where(TranscriptMessage.sent_at >= query.since)
        if query.before is not None:
            stmt = stmt.where(TranscriptMessage.sent_at < query.before)
        terms = query_terms(query.text)
        width = self.settings.search_snippet_chars
        hits: list[tuple[SearchHit, int]] = []
        for message, segment in (await session.execute(stmt)).all():
            covered = _covered(message, segment)
            score = base[message.id] * (self.settings.search_covered_penalty if covered else 1.0)
            day = segment.day if segment is not None else message.sent_at.date()
            hit = SearchHit(
                kind="message",
                day_label=day.isoformat(),
                day_segment_id=message.day_segment_id,
                message_id=message.id,
                snippet=make_snippet(message.content, terms, width),
                covered_by_summary=covered,
                score=round(score, 4),
                role=message.role,
                sent_at=message.sent_at.isoformat(timespec="minutes"),
            )
            hits.append((hit, day.toordinal()))
        hits.sort(key=lambda pair: _sort_key(*pair))
        return [h for h, _ in hits]


def _covered(message: TranscriptMessage, segment: DaySegment | None) -> bool:
    """True when the day's summary was written after this message (it already tells its gist)."""
    if segment is None or not segment.summary:
        return False
    if segment.last_summarized_message_id is not None:
        return message.id <= segment.last_summarized_message_id
    return segment.summary_updated_at is not None and message.sent_at <= segment.summary_updated_at


def recency_start(now: datetime, recency_days: int | None) -> datetime | None:
    """The earliest time a `recency_days` filter keeps."""
    return None if recency_days is None else now - timedelta(days=recency_days)
