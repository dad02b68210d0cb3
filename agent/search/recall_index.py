"""Keeping the search index current: what `Recall` searches is only as fresh as this.

A turn's hook indexes quietly after each reply; a search catches up first, for at most the embedder's
search timeout, and leaves the rest running in the background; the start warms the vectors of the
most recently active users; `reindex` rebuilds it all. A failed pass is logged, never raised into a
reply: full text stays current by itself and ranks what is not embedded yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.writers import WriteGuard
from agent.core.bounded import BoundedCache, KeyedLocks
from agent.core.errors import EmbedderUnavailableError, UserForgottenError
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.core.usage import metering, store_usage_apart
from agent.search.embeddings import Embedder, Preloadable
from agent.search.fts import full_text_for
from agent.search.indexer import Indexer, IndexStats
from agent.search.search import ConversationSearch
from agent.search.units import MessageUnits
from agent.search.vectors import VectorCache
from db.models import Conversation, DaySegment, TranscriptMessage, User, UserFact
from db.repositories.users import user_present

logger = logging.getLogger(__name__)

# What a failed embedding pass may raise: the model, the database, or numpy on a bad shape.
INDEX_ERRORS = (EmbedderUnavailableError, SQLAlchemyError, OSError, ValueError, RuntimeError)
# Messages a warm-up step indexes at most: a few tenths of a second of MiniLM, however long the backlog.
WARM_SLICE = 32
# Messages one catch-up pass embeds at most: a long backlog (an imported history) is embedded in
# passes of bounded memory, each committed, until it is done or the process stops.
CATCH_UP_SLICE = 256

Pause = Callable[[], Awaitable[object]]
"""What the warm-up awaits before each step (the runtime's: until no turn runs)."""


async def _go_on() -> None:
    """No pause: every step at once (tests, benchmarks, the terminal chat)."""


class RecallIndex:
    """The search index of every user, kept current: a pass per user at a time, a catch-up before a
    search, warm vectors at start and a full rebuild on demand."""

    def __init__(
        self,
        *,
        settings: Settings,
        sessions: async_sessionmaker[AsyncSession],
        dialect: str,
        embedder: Embedder | None,
        units: MessageUnits | None = None,
        guard: WriteGuard | None = None,
    ) -> None:
        self.settings = settings
        self.sessions = sessions
        # Indexing passes register here, so /forget waits for one in flight (agent/account/writers.py).
        self.guard = guard if guard is not None else WriteGuard(sessions)
        self.full_text = full_text_for(dialect, scan=settings.search_fts_scan_limit)
        self.embedder = embedder if embedder is not None and embedder.dimensions > 0 else None
        # Units that stand for messages (the person's facts, agent/memory/units.py), when given.
        self.units = units
        self.ranking = ConversationSearch(settings, self.full_text, units)
        # Bounded: a lock lives only while a pass holds or awaits it; markers are an LRU.
        self._index_locks: KeyedLocks[int] = KeyedLocks()
        self._indexed: BoundedCache[int, tuple[Any, ...]] = BoundedCache(
            max_entries=settings.search_indexed_users
        )
        self.cache: VectorCache | None = None
        self.indexer: Indexer | None = None
        self._background: set[asyncio.Task[IndexStats | None]] = set()
        # Set by `stop`: a catch-up ends after its current pass (the rest waits for the next start).
        self._stopping = False
        if self.embedder is not None:
            self.cache = VectorCache(
                embedder=self.embedder.name,
                dimensions=self.embedder.dimensions,
                max_users=settings.search_vector_cache_users,
                max_bytes=settings.search_vector_cache_bytes,
            )
            self.indexer = Indexer(
                settings=settings,
                embedder=self.embedder,
                counter=get_counter(),
                cache=self.cache,
                units=units,
            )

    async def warm_up(self, *, now: datetime, pause: Pause | None = None) -> None:
        """At start: load the embedding model, then catch up the index of the most recently active
        users and load their vectors; before each step, `await pause()` (the runtime waits there
        until no turn runs).

        The first search after a restart then costs what any search costs; without it, it paid for
        the model (~0.5 s), the index catch-up check and the user's matrix (~0.2-0.4 s at 100,000
        messages). A user's catch-up goes WARM_SLICE messages a step, so no step is long whatever
        the backlog (a process that stopped before it embedded, say).
        """
        pause = pause or _go_on
        if isinstance(self.embedder, Preloadable):
            await pause()
            try:
                await asyncio.to_thread(self.embedder.load)
            except EmbedderUnavailableError as exc:
                logger.warning("embedding model unavailable; full text only", extra={"error": str(exc)})
                return
        wanted = min(self.settings.search_warm_users, self.settings.search_vector_cache_users)
        if self.cache is None or wanted <= 0:
            return
        started = time.perf_counter()
        try:
            async with self.sessions() as session:
                recent = await session.scalars(
                    select(User.id)
                    .where(User.last_message_at.is_not(None))
                    .order_by(User.last_message_at.desc())
                    .limit(wanted)
                )
                users = list(recent)
            for user_id in users:
                await self._warm_user(user_id, now=now, pause=pause)
        except SQLAlchemyError as exc:
            logger.warning("vector warm-up failed", exc_info=exc)
            return
        if not users:
            return  # an empty database: nothing was warmed, nothing to say
        logger.info(
            "search vectors warmed",
            extra={"users": len(users), "ms": round((time.perf_counter() - started) * 1000, 1)},
        )

    async def _warm_user(self, user_id: int, *, now: datetime, pause: Pause) -> None:
        """Catch up one user's index a slice a step, then load their vectors."""
        assert self.cache is not None
        while True:
            await pause()
            stats = await self.index_quietly(user_id, now=now, limit=WARM_SLICE)
            if stats is None or not stats.more:
                break
        await pause()
        # Registered like a search's load: /forget must not clear the cache under it.
        async with self.guard.registered(user_id), self.sessions() as session:
            await self.cache.get(session, user_id)

    def cache_sizes(self) -> dict[str, int]:
        """How much the per-user maps hold right now (each is bounded; see the settings)."""
        sizes = {
            "index_locks": len(self._index_locks),
            "indexed_users": len(self._indexed),
            "fact_word_users": len(self.units) if self.units is not None else 0,
        }
        if self.cache is not None:
            sizes |= {"vector_users": len(self.cache), "vector_bytes": self.cache.bytes}
            sizes["vector_locks"] = self.cache.locks_in_use
        return sizes

    def remembers(self, user_id: int) -> bool:
        """Whether anything of the user is held in this process's memory (index marker, vectors)."""
        return (
            user_id in self._indexed
            or (self.units is not None and self.units.holds(user_id))
            or (self.cache is not None and user_id in self.cache)
        )

    # --- indexing -------------------------------------------------------------------------------

    async def index_user(self, user_id: int, *, now: datetime, limit: int | None = None) -> IndexStats:
        """Embed what is new for this user (full text is always current); raises on failure.

        `UserForgottenError` when the user is gone: nothing is written for them. `limit`: at most
        that many new messages (`stats.more` says whether some are left).
        """
        if self.indexer is None:
            return IndexStats()
        # One pass per user at a time in this process: a turn's hook and a search's catch-up may meet.
        # A hosted embedder's tokens are the user's spend (their daily cap counts them too).
        async with self.guard.registered(user_id), self._index_locks.hold(user_id):
            with metering() as meter:
                async with self.sessions() as session, session.begin():
                    if not await user_present(session, user_id):
                        raise UserForgottenError(f"user {user_id} was forgotten")
                    stats = await self.indexer.index_user(session, user_id, now=now, limit=limit)
            await store_usage_apart(self.sessions, user_id, now.astimezone(UTC).date(), meter)
            return stats

    async def _marker(self, user_id: int) -> tuple[Any, ...]:
        """The newest message id, summary time, fact id and conversation id of the user: what the index
        must have seen."""
        newest = (
            select(TranscriptMessage.id)
            .where(TranscriptMessage.user_id == user_id)
            .order_by(TranscriptMessage.sent_at.desc(), TranscriptMessage.id.desc())
            .limit(1)
            .scalar_subquery()
        )
        summarised = (
            select(func.max(DaySegment.summary_updated_at))
            .where(DaySegment.user_id == user_id)
            .scalar_subquery()
        )
        facts = select(func.max(UserFact.id)).where(UserFact.user_id == user_id).scalar_subquery()
        # An imported history's messages are older than the newest one: its conversations mark it.
        conversations = (
            select(func.max(Conversation.id)).where(Conversation.user_id == user_id).scalar_subquery()
        )
        async with self.sessions() as session:  # one round trip: this runs before every search
            row = (await session.execute(select(newest, summarised, facts, conversations))).one()
        return row[0], row[1], row[2], row[3]

    async def index_quietly(
        self, user_id: int, *, now: datetime, limit: int | None = None
    ) -> IndexStats | None:
        """`index_user` that logs a failure instead of raising: a reply never depends on the index.

        Two indexed look-ups decide whether anything changed since this process last indexed the
        user; only then does the indexer run. Without a `limit` it runs passes of CATCH_UP_SLICE
        messages until everything is embedded (or `stop` is called), each its own transaction.
        """
        try:
            marker = await self._marker(user_id)
            if self._indexed.get(user_id) == marker:
                return IndexStats()
            total = IndexStats()
            while True:
                stats = await self.index_user(user_id, now=now, limit=limit or CATCH_UP_SLICE)
                total.add(stats)
                total.more = stats.more
                if limit is not None or not stats.more or self._stopping:
                    break
            if not total.more:
                self._indexed.put(user_id, marker)
            return total
        except UserForgottenError:
            return None
        except INDEX_ERRORS as exc:
            logger.warning(
                "indexing failed; left for the next search or reindex",
                extra={"user_id": user_id},
                exc_info=exc,
            )
            return None

    async def catch_up(self, user_id: int, *, now: datetime, wait_seconds: float | None = None) -> None:
        """Index what the turn hook missed before a search, waiting at most `wait_seconds`
        (EMBEDDER_SEARCH_TIMEOUT_SECONDS by default): a slow or unreachable embedder (or a long
        backlog) goes on in the background, and the search ranks what is not embedded yet by full
        text."""
        task = asyncio.create_task(self.index_quietly(user_id, now=now))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        wait = self.settings.embedder_search_timeout_seconds if wait_seconds is None else wait_seconds
        await asyncio.wait({task}, timeout=wait)

    async def catch_up_facts(self, user_id: int, *, now: datetime, wait_seconds: float) -> None:
        """Embed the person's new facts before a recall ranks them, waiting at most `wait_seconds`
        (the rest goes on in the background). Only the facts: a handful of short texts, where a
        transcript's backlog (a process that stopped before it embedded) can take seconds; and not
        while a pass of theirs runs, which embeds the facts at its end anyway."""
        if self.indexer is None or self.units is None or self._index_locks.holds(user_id):
            return
        task = asyncio.create_task(self._index_facts(user_id, now=now))
        self._background.add(task)
        task.add_done_callback(self._background.discard)
        await asyncio.wait({task}, timeout=wait_seconds)

    async def _index_facts(self, user_id: int, *, now: datetime) -> IndexStats | None:
        assert self.indexer is not None and self.units is not None
        try:
            async with self.guard.registered(user_id), self._index_locks.hold(user_id):
                with metering() as meter:
                    async with self.sessions() as session, session.begin():
                        if not await user_present(session, user_id):
                            return None
                        embedded = await self.units.index(
                            session, user_id, embedder=self.indexer.embedder, now=now
                        )
                await store_usage_apart(self.sessions, user_id, now.astimezone(UTC).date(), meter)
        except INDEX_ERRORS as exc:
            logger.warning(
                "fact indexing failed; left for the next pass", extra={"user_id": user_id}, exc_info=exc
            )
            return None
        if embedded:
            self.indexer.cache.invalidate(user_id)
        return IndexStats(facts=embedded)

    def stop(self) -> None:
        """Let catch-ups end after their current pass: the process is stopping."""
        self._stopping = True

    async def settle(self) -> None:
        """Wait for the indexing passes searches left running in the background."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    async def reindex(
        self,
        *,
        now: datetime,
        user_ids: Sequence[int] | None = None,
        progress: Callable[[int, IndexStats], None] | None = None,
    ) -> IndexStats:
        """Rebuild the full text (all users) and the embeddings of the given users (all by default)."""
        total = IndexStats()
        async with self.sessions() as session, session.begin():
            if user_ids is None:
                await self.full_text.rebuild(session)
                user_ids = list((await session.execute(select(User.id).order_by(User.id))).scalars())
        for user_id in user_ids:
            stats = IndexStats()
            if self.indexer is not None:
                async with self.sessions() as session, session.begin():
                    self._indexed.pop(user_id)
                    await self.indexer.clear_user(session, user_id)
                    stats = await self.indexer.index_user(session, user_id, now=now)
            total.add(stats)
            if progress is not None:
                progress(user_id, stats)
        return total
