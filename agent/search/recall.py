"""`Recall`: the search services one runtime holds (indexes, ranking, get), for the tools."""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import replace
from datetime import date, datetime
from typing import Any

from sqlalchemy import func, select

from agent.account.groups import PERSON
from agent.core.clock import local_day
from agent.core.errors import EmbedderUnavailableError, RecallInputError
from agent.search import get as getters
from agent.search.dates import DayRange
from agent.search.get import MessagesOut, SummaryOut
from agent.search.imported import labelled_hits, labelled_messages
from agent.search.own_words import merged, own_group_words
from agent.search.recall_index import RecallIndex
from agent.search.search import SearchHit, SearchQuery, recency_start
from agent.search.turns import speaker_name
from db.models import SearchChunk, User

logger = logging.getLogger(__name__)


class Recall(RecallIndex):
    """Conversation search and get, and the index they read, for any user id given."""

    name = "search_index"

    # --- the tools --------------------------------------------------------------------------------

    async def search(
        self,
        user_id: int,
        query: str,
        *,
        now: datetime,
        day: date | None = None,
        recency_days: int | None = None,
        limit: int | None = None,
        min_score: float | None = None,
        before: datetime | None = None,
        from_day: date | None = None,
        to_day: date | None = None,
    ) -> list[SearchHit]:
        """conversation_search for this user; `before` leaves out the current turn; messages of the
        days from `from_day` to `to_day` (either may be open; the person's local days) rank higher."""
        if not query.strip():
            raise RecallInputError("query is empty; say what to look for")
        if from_day is not None and to_day is not None and from_day > to_day:
            raise RecallInputError("from_day must not be after to_day")
        if recency_days is not None and recency_days < 1:
            raise RecallInputError("recency_days must be at least 1")
        wanted = self.settings.search_default_limit if limit is None else limit
        if wanted < 1:
            raise RecallInputError("limit must be at least 1")
        spec = SearchQuery(
            text=query,
            day=day,
            since=recency_start(now, recency_days),
            limit=min(wanted, self.settings.search_max_limit),
            min_score=min_score,
            before=before,
        )
        started = time.perf_counter()
        query_vector = None
        if self.embedder is not None:
            await self.catch_up(user_id, now=now)
            try:
                async with asyncio.timeout(self.settings.embedder_search_timeout_seconds):
                    query_vector = (await self.embedder.embed([query], input_type="query"))[0]
            except (EmbedderUnavailableError, TimeoutError) as exc:
                logger.warning(
                    "query embedding failed; full text only", extra={"user_id": user_id}, exc_info=exc
                )
        # Registered: the vector cache is filled here, and /forget must not clear it under a search.
        async with self.guard.registered(user_id), self.sessions() as session:
            # The speakers' names are left out of the lexical side (see search.without_speakers).
            row = (
                await session.execute(
                    select(User.name, User.timezone, User.language, User.telegram_id, User.kind).where(
                        User.id == user_id
                    )
                )
            ).first()
            user_name: str | None = row[0] if row is not None else None
            timezone: str = (row[1] if row is not None else None) or "UTC"
            language: str | None = row[2] if row is not None else None
            telegram_id: int | None = row[3] if row is not None else None
            kind: str | None = row[4] if row is not None else None
            spec = replace(
                spec,
                speakers=(user_name or "", self.settings.persona_name),
                today=local_day(now, timezone),
                language=language,
            )
            if from_day is not None or to_day is not None:
                spec = replace(spec, days=(DayRange(from_day or date.min, to_day or spec.today or date.max),))
            vectors = None
            if self.cache is not None and query_vector is not None:
                vectors = await self.cache.get(session, user_id)
            hits = await self.ranking.run(session, user_id, spec, query_vector=query_vector, vectors=vectors)
            hits = await labelled_hits(session, user_id, hits)  # lines imported from another assistant
            # A person's own lines in groups, only when the operator allows it (agent/search/own_words.py).
            if self.settings.group_recall_own_words and kind == PERSON and telegram_id is not None:
                own = await own_group_words(
                    session,
                    telegram_id,
                    spec,
                    timezone=timezone,
                    speaker=speaker_name("user", user_name=user_name or "", persona_name=""),
                    snippet_chars=self.settings.search_snippet_chars,
                )
                hits = merged(hits, own, spec.limit)
        logger.info(
            "conversation search",
            extra={
                "user_id": user_id,
                "results": len(hits),
                "ms": round((time.perf_counter() - started) * 1000, 1),
            },
        )
        return hits

    async def get(
        self,
        user_id: int,
        *,
        message_id: int | None = None,
        day_segment_id: int | None = None,
        from_message_id: int | None = None,
        to_message_id: int | None = None,
    ) -> MessagesOut | SummaryOut:
        """conversation_get for this user: exactly one of the three shapes."""
        ranged = from_message_id is not None or to_message_id is not None
        async with self.sessions() as session:
            if message_id is not None:
                if day_segment_id is not None or ranged:
                    raise RecallInputError(
                        "give message_id alone, or day_segment_id (with an optional range)"
                    )
                return await labelled_messages(
                    session, user_id, await getters.get_message(session, user_id, message_id)
                )
            if day_segment_id is None:
                raise RecallInputError("give message_id, or day_segment_id (with an optional range)")
            if not ranged:
                return await getters.get_day_summary(session, user_id, day_segment_id)
            if from_message_id is None or to_message_id is None:
                raise RecallInputError("a range needs both from_message_id and to_message_id")
            found = await getters.get_range(
                session,
                user_id,
                day_segment_id,
                from_message_id,
                to_message_id,
                max_messages=self.settings.search_get_max_messages,
            )
            return await labelled_messages(session, user_id, found)

    # --- UserDataStore (agent/account/forget.py) ----------------------------------------------------

    async def export_user(self, user_id: int) -> Any:
        """Derived data only: how much of the user is indexed (the texts are in the core export)."""
        async with self.sessions() as session:
            chunks = await session.scalar(
                select(func.count(SearchChunk.id)).where(SearchChunk.user_id == user_id)
            )
        return {
            "embedded_chunks": int(chunks or 0),
            "embedder": self.embedder.name if self.embedder else None,
        }

    def units_changed(self, user_id: int) -> None:
        """The user's units (facts) changed in place: what this process holds of them is read again,
        and the next pass indexes them."""
        self._indexed.pop(user_id)
        if self.units is not None:
            self.units.forget(user_id)
        if self.cache is not None:
            self.cache.invalidate(user_id)

    async def forget_user(self, user_id: int) -> None:
        """Delete the user's embeddings and drop them from memory.

        The FTS5 tables are external-content tables kept by triggers, so the cascade that deletes
        the user's messages and days also removes them from the full-text index (and
        `forget_user` merges it, so no segment keeps their words).
        """
        self._indexed.pop(user_id)
        if self.units is not None:
            self.units.forget(user_id)
        if self.indexer is not None:
            async with self.sessions() as session, session.begin():
                await self.indexer.clear_user(session, user_id)
        if self.cache is not None:
            self.cache.invalidate(user_id)
