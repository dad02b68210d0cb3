"""`conversation_search`: summaries first, then transcript, hybrid scores.

base = vector_weight x cosine + lexical_weight x (FTS score / best FTS score of this search);
a message's cosine is that of the best embedded section holding it, its lexical score includes a
share of its previous turn's, and the speaker and days a query names and the days whose summary
it matches weigh in (`rescore`).
Transcript hits already covered by their day's summary are multiplied by the covered penalty.
Ties: newer day, then newer message. Message hits carry who said them and the turns either side
(`messages`). Every query is scoped to one user id, which callers take from the run's deps.
"""

from __future__ import annotations

from datetime import date

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.settings import Settings
from agent.search.fts import FullText, query_terms
from agent.search.messages import MessageRanking
from agent.search.query import (
    SearchHit,
    SearchQuery,
    allowed_rows,
    make_snippet,
    recency_start,
    sort_key,
    without_speakers,
)
from agent.search.units import MessageUnits
from agent.search.vectors import KIND_SUMMARY, UserVectors
from db.models import DaySegment

__all__ = ["ConversationSearch", "SearchHit", "SearchQuery", "recency_start", "without_speakers"]


class ConversationSearch:
    """The hybrid ranking over full text and (optionally) the user's vectors."""

    def __init__(self, settings: Settings, full_text: FullText, units: MessageUnits | None = None) -> None:
        self.settings = settings
        self.full_text = full_text
        self.messages = MessageRanking(settings, full_text, units)

    def weights(self, vectors_on: bool) -> tuple[float, float]:
        """(vector, lexical) weights; full text alone when embeddings are off."""
        return self.messages.weights(vectors_on)

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
        # Each matching summary is a key of its day's messages.
        top = max((h.score for h in summaries), default=0.0)
        days = {date.fromisoformat(h.day_label): h.score / top for h in summaries if top > 0}
        messages = await self.messages.run(session, user_id, query, segment_filter, vectors, sims, days)
        if query.min_score is not None:
            summaries = [h for h in summaries if h.score >= query.min_score]
            messages = [h for h in messages if h.score >= query.min_score]
        taken = summaries[: min(self.settings.search_max_summaries, query.limit)]
        return [*taken, *messages][: query.limit]

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
            session, user_id, query.text, limit=self.settings.search_candidates, language=query.language
        )
        best = max((h.score for h in lexical), default=0.0)
        scores: dict[int, float] = {h.id: wl * h.score / best for h in lexical}
        if sims is not None and vectors is not None:
            summary_rows = vectors.kinds == KIND_SUMMARY
            allowed = allowed_rows(vectors, query, segment_filter) & summary_rows
            cosine: dict[int, float] = {}
            for row in np.flatnonzero(allowed):
                segment = int(vectors.day_segment_ids[row])
                cosine[segment] = max(cosine.get(segment, -1.0), float(sims[row]))
            for segment, value in cosine.items():
                scores[segment] = scores.get(segment, 0.0) + wv * value
            # A summary only another model embedded (before `bot reindex`): full text decides.
            embedded = set(vectors.day_segment_ids[summary_rows].tolist())
            for h in lexical:
                if h.id not in embedded:
                    scores[h.id] += wv * h.score / best
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
        hits.sort(key=lambda pair: sort_key(*pair))
        return [h for h, _ in hits]
