"""The transcript side of conversation_search: candidates from both indexes, rescored, read back
with who said them and the turns either side (the hybrid base plus the rescoring signals).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import date

import numpy as np
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.account.timeline import covered_by_summary
from agent.core.settings import SearchSettings
from agent.search.dates import DayRange, describe_day, named_days
from agent.search.diversity import is_overview, is_summary, spread_over_days
from agent.search.fts import FullText, query_terms
from agent.search.query import SearchHit, SearchQuery, allowed_rows, make_snippet, sort_key, without_speakers
from agent.search.rescore import Signals, final_scores
from agent.search.turns import TurnInfo, by_ids, named_role, neighbours, speaker_name, turn_info
from agent.search.units import MessageUnits
from agent.search.vectors import KIND_FACT, KIND_MESSAGES, UserVectors
from db.models import DaySegment, TranscriptMessage

# The best hits whose facts' links pull the related turns of other days in (SEARCH_LINK_WEIGHT).
LINK_SEEDS = 5


class MessageRanking:
    """Ranks one user's transcript messages for a query."""

    def __init__(
        self, settings: SearchSettings, full_text: FullText, units: MessageUnits | None = None
    ) -> None:
        self.settings = settings
        self.full_text = full_text
        # Units that point at messages (the person's facts), when the runtime gives them.
        self.units = units

    def weights(self, vectors_on: bool) -> tuple[float, float]:
        """(vector, lexical) weights; full text alone when embeddings are off."""
        if not vectors_on:
            return 0.0, 1.0
        return self.settings.search_vector_weight, self.settings.search_lexical_weight

    def _vector_candidates(
        self,
        vectors: UserVectors,
        sims: np.ndarray,
        allowed: np.ndarray,
        days: list[DayRange],
    ) -> dict[int, float]:
        """Best cosine per message of the top sections, plus the best sections of the named days."""
        candidates = self.settings.search_candidates
        masked = np.where(allowed, sims, -np.inf)
        cosine: dict[int, float] = {}
        # The best sections, in order, until they offer `candidates` messages (sizes vary).
        top = min(int(allowed.sum()), candidates)
        best_rows = np.argpartition(-masked, top - 1)[:top] if top > 0 else np.zeros(0, dtype=np.int64)
        for row in sorted(best_rows.tolist(), key=lambda r: -float(masked[r])):
            for message_id in vectors.section_messages(row):
                cosine[message_id] = max(cosine.get(message_id, -1.0), float(sims[row]))
            if len(cosine) >= candidates:
                break
        wanted = self.settings.search_date_candidates
        if days and wanted > 0:
            on_days = np.zeros(vectors.size, dtype=bool)
            for named in days:
                on_days |= (vectors.days >= named.first.toordinal()) & (
                    vectors.days <= named.last.toordinal()
                )
            dated = np.where(allowed & on_days, sims, -np.inf)
            for row in np.argsort(-dated)[:wanted].tolist():
                if not np.isfinite(dated[row]):
                    break
                for message_id in vectors.section_messages(row):
                    cosine[message_id] = max(cosine.get(message_id, -1.0), float(sims[row]))
        return cosine

    def _with_facts(self, vectors: UserVectors, sims: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(similarities with fact rows x SEARCH_FACT_WEIGHT, the rows that rank: sections and facts)."""
        weight = self.settings.search_fact_weight
        # A fact that names no message (saved by a tool) has nothing to bring to the transcript.
        facts = (vectors.kinds == KIND_FACT) & (np.diff(vectors.offsets) > 0)
        if weight <= 0 or not facts.any():
            return np.where(facts, np.float32(-1.0), sims), vectors.kinds == KIND_MESSAGES
        return np.where(facts, sims * np.float32(weight), sims), facts | (vectors.kinds == KIND_MESSAGES)

    async def _fact_candidates(
        self, session: AsyncSession, user_id: int, query: SearchQuery
    ) -> dict[int, float]:
        """Source messages of the facts matching the query's words, with the fact's score x its weight."""
        weight = self.settings.search_fact_weight
        if weight <= 0 or self.units is None:
            return {}
        text = without_speakers(query.text, query.speakers)
        scores = await self.units.message_scores(
            session, user_id, text, language=query.language, limit=self.settings.search_candidates
        )
        return {message_id: score * weight for message_id, score in scores.items()}

    async def _linked(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        base: Mapping[int, float],
        info: dict[int, TurnInfo],
    ) -> dict[int, float]:
        """The turns of other days that the facts standing on the best `LINK_SEEDS` hits link to
        (shared rare words, `FactUnits.linked_scores`), each with SEARCH_LINK_WEIGHT x its seed's score
        x the link's share; their turn information joins `info`."""
        weight = self.settings.search_link_weight
        # With SEARCH_FACT_WEIGHT 0 the facts take no part, their links neither.
        if weight <= 0 or self.settings.search_fact_weight <= 0 or self.units is None or not base:
            return {}
        seeds = {i: base[i] for i in sorted(base, key=lambda i: (-base[i], -i))[:LINK_SEEDS]}
        found = await self.units.linked_scores(
            session, user_id, seeds, language=query.language, limit=self.settings.search_candidates
        )
        info.update(await turn_info(session, user_id, found.keys() - info.keys()))
        out: dict[int, float] = {}
        for message_id, (score, seed) in found.items():
            turn, origin = info.get(message_id), info.get(seed)
            # Another user's id has no turn information (`turn_info`), so it never ranks.
            if turn is not None and origin is not None and turn.day != origin.day:
                out[message_id] = weight * score
        return out

    def _signals(
        self, query: SearchQuery, vectors_on: bool, days: list[DayRange], summary_days: Mapping[date, float]
    ) -> Signals:
        wv, wl = self.weights(vectors_on)
        user_name, persona_name = (*query.speakers, "", "")[:2]
        return Signals(
            vector_weight=wv,
            lexical_weight=wl,
            previous_turn_weight=self.settings.search_previous_turn_weight,
            other_speaker_factor=self.settings.search_other_speaker_factor,
            date_boost=self.settings.search_date_boost,
            named_role=named_role(
                query.text,
                user_name=user_name,
                persona_name=persona_name,
                # A summary tells both sides of the conversations, whoever "I" or "you" are.
                pronouns=not (
                    self.settings.search_summary_both_speakers and is_summary(query.text, query.language)
                ),
            ),
            days=days,
            summary_days=summary_days,
            summary_key_boost=self.settings.search_summary_key_boost,
        )

    async def run(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        segment_filter: int | None,
        vectors: UserVectors | None,
        sims: np.ndarray | None,
        summary_days: Mapping[date, float] | None = None,
    ) -> list[SearchHit]:
        """The best `query.limit` messages, with their neighbours; `summary_days`: the days whose
        summary matched the query, with its relative score (their messages rank higher)."""
        lexical_hits = await self.full_text.messages(
            session,
            user_id,
            without_speakers(query.text, query.speakers),
            limit=self.settings.search_candidates,
            day_segment_id=segment_filter,
            since=query.since,
            language=query.language,
        )
        lexical = {h.id: h.score for h in lexical_hits}
        days = [*query.days, *(named_days(query.text, query.today) if query.today is not None else [])]
        facts = await self._fact_candidates(session, user_id, query)
        cosine: dict[int, float] = {}
        if sims is not None and vectors is not None:
            sims, units = self._with_facts(vectors, sims)
            allowed = allowed_rows(vectors, query, segment_filter) & units
            cosine = self._vector_candidates(vectors, sims, allowed, days)
        ids = set(lexical) | set(cosine) | set(facts)
        # The turn after a lexical hit may be the answer to it: it competes too (same statement).
        leaders = lexical if self.settings.search_previous_turn_weight > 0 else {}
        info = await turn_info(session, user_id, ids, leaders=leaders.keys())
        ids |= set(info)
        unembedded: set[int] = set()
        if sims is not None and vectors is not None:
            for message_id in ids - set(cosine):
                rows = vectors.rows_of(message_id)
                if rows:
                    cosine[message_id] = max(float(sims[r]) for r in rows)
                else:
                    unembedded.add(message_id)  # not (yet) in this model's index: full text decides
        if not ids:
            return []
        signals = self._signals(query, sims is not None, days, summary_days or {})
        base = final_scores(
            ids,
            cosine=cosine,
            lexical=lexical,
            info=info,
            signals=signals,
            unembedded=unembedded,
            facts=facts,
        )
        for message_id, score in (await self._linked(session, user_id, query, base, info)).items():
            base[message_id] = base.get(message_id, 0.0) + score
        # Only the best few are read back; ranking needs no more than the limit's worth.
        keep = sorted(base, key=lambda i: (-base[i], -i))[: max(query.limit * 3, 30)]
        factor = self.settings.search_overview_day_factor
        if factor < 1 and is_overview(query.text, query.language):
            # An order or a progress across the conversations: each next hit of a day already
            # represented gives way to another day's (agent/search/diversity.py).
            days_of = {i: info[i].day for i in keep if i in info}
            base.update(spread_over_days(keep, base, days_of, factor))
        return await self._message_hits(session, user_id, query, segment_filter, keep, base, info)

    async def _message_hits(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        segment_filter: int | None,
        keep: list[int],
        base: dict[int, float],
        info: dict[int, TurnInfo],
    ) -> list[SearchHit]:
        stmt = (
            select(TranscriptMessage, DaySegment)
            .outerjoin(DaySegment, DaySegment.id == TranscriptMessage.day_segment_id)
            .where(by_ids(TranscriptMessage.id, keep))
        )
        if segment_filter is not None:
            stmt = stmt.where(TranscriptMessage.day_segment_id == segment_filter)
        if query.since is not None:
            stmt = stmt.where(TranscriptMessage.sent_at >= query.since)
        if query.before is not None:
            stmt = stmt.where(TranscriptMessage.sent_at < query.before)
        terms = query_terms(query.text)
        width = self.settings.search_snippet_chars
        user_name, persona_name = (*query.speakers, "", "")[:2]
        ranked: list[tuple[SearchHit, int]] = []
        for message, segment in (await session.execute(stmt)).all():
            if message.user_id != user_id:
                continue  # another user's id: never shown (see turns.by_ids)
            covered = covered_by_summary(message, segment)
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
                # A group's messages name their own speaker; a private chat's are the user's or the bot's.
                speaker=message.speaker_name
                or speaker_name(message.role, user_name=user_name, persona_name=persona_name),
                when=describe_day(day, query.today) if query.today is not None else None,
            )
            ranked.append((hit, day.toordinal()))
        ranked.sort(key=lambda pair: sort_key(*pair))
        hits = [h for h, _ in ranked][: query.limit]
        return await self._with_neighbours(session, user_id, query, hits, info)

    async def _with_neighbours(
        self,
        session: AsyncSession,
        user_id: int,
        query: SearchQuery,
        hits: list[SearchHit],
        info: dict[int, TurnInfo],
    ) -> list[SearchHit]:
        """The hits with the turn before and after each (same day), so one search usually suffices."""
        sides = {h.message_id: info.get(h.message_id or 0) for h in hits}
        wanted = {i for t in sides.values() if t for i in (t.previous_id, t.next_id) if i is not None}
        names = (*query.speakers, "", "")[:2]
        found = await neighbours(
            session,
            user_id,
            wanted,
            width=self.settings.search_neighbour_chars,
            names=(names[0], names[1]),
            before=query.before,
        )
        out: list[SearchHit] = []
        for hit in hits:
            turn = sides.get(hit.message_id)
            if turn is None:
                out.append(hit)
                continue
            out.append(
                replace(
                    hit,
                    previous_turn=found.get(turn.previous_id) if turn.previous_id else None,
                    next_turn=found.get(turn.next_id) if turn.next_id else None,
                )
            )
        return out
