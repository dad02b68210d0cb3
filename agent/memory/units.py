"""Facts as search units: every held fact is embedded and matched by its words, and ranks both as a
fact (recall, memory_search) and for the messages it comes from (conversation_search).

A fact is embedded as one row of `search_chunks` (kind `fact`, keyed by a digest of its id, words
and sources) whose one section holds the fact's message ids: the transcript's vector side reads it
like any section and expands it to those messages (a fact saved by the voice agent has none, so
it reaches no message). The lexical side scores a person's facts in Python (hundreds or thousands of facts,
not hundreds of thousands of messages) with the transcript's IDF weighting, in the person's
language. What this process keeps of a person's facts (their words, their vectors) is read again
whenever the facts change. Every query is scoped to one owner id, and source ids are checked
against the owner's own messages before they are stored in the index.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import ColumnElement, Integer, Select, String, bindparam, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.bounded import BoundedCache
from agent.core.settings import SearchSettings
from agent.memory.words import Postings, fact_words
from agent.search.embeddings import Embedder
from agent.search.turns import by_ids
from db.models import SearchChunk, TranscriptMessage, User, UserFact
from db.repositories.facts import FactRepository, version_statement

KIND_FACT_CHUNK = "fact"
# The facts read per person at most (newest first): far more than anyone tells a companion.
MAX_FACTS_SCANNED = 5000
# The share of a fact's link words' weight (their IDFs over the person's facts) another fact must
# hold to be linked to it (`FactUnits.linked_scores`).
LINK_MIN_SHARE = 0.25
# A word held by more of the person's facts than this (or than 1 in 20 of them) links nothing.
LINK_MAX_HOLDERS = 3


FactsVersion = tuple[int, int, str, int, int]


@dataclass(frozen=True)
class FactsState:
    """The person's language and the versions of their list of facts and of its vectors."""

    language: str | None
    version: FactsVersion
    vectors: tuple[int, int]


def _space(user_id: Any, embedder: Any, dimensions: Any) -> tuple[ColumnElement[bool], ...]:
    """The person's fact vectors in one embedder's space."""
    return (
        SearchChunk.user_id == user_id,
        SearchChunk.kind == KIND_FACT_CHUNK,
        SearchChunk.embedder == embedder,
        SearchChunk.dimensions == dimensions,
    )


@functools.cache
def _state() -> Select[Any]:
    # Built once, as the list's version it extends: every recall reads it.
    owner = bindparam("owner_id", type_=Integer())
    space = _space(owner, bindparam("embedder", type_=String()), bindparam("dimensions", type_=Integer()))
    return version_statement().add_columns(
        select(User.language).where(User.id == owner).scalar_subquery(),
        select(func.count(SearchChunk.id)).where(*space).scalar_subquery(),
        select(func.max(SearchChunk.id)).where(*space).scalar_subquery(),
    )


def fact_digest(fact_id: int, content: str, message_ids: list[int]) -> str:
    """What a fact's search row is keyed by: a changed fact is embedded again."""
    raw = f"{fact_id}\x1f{content}\x1f{','.join(map(str, message_ids))}"
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class KnownFact:
    """A held fact as retrieval reads it."""

    id: int
    content: str
    message_ids: tuple[int, ...]
    hidden: bool
    valid_until: datetime | None
    created_at: datetime
    digest: str

    @classmethod
    def of(cls, fact: UserFact) -> KnownFact:
        """From its row."""
        ids = sorted({int(m) for m in fact.message_ids or []})
        return cls(
            fact.id,
            fact.content,
            tuple(ids),
            bool(fact.hidden),
            fact.valid_until,
            fact.created_at,
            fact_digest(fact.id, fact.content, ids),
        )


@dataclass(frozen=True)
class Known:
    """A person's held facts (newest first) with their words, and the version they were read at."""

    version: tuple[int, int, str, int, int, str]
    facts: tuple[KnownFact, ...]
    postings: Postings


@dataclass(frozen=True)
class FactVectors:
    """A person's embedded facts in one vector space: the row of each fact's digest, and the rows."""

    version: tuple[int, int]
    rows: dict[str, int]
    matrix: npt.NDArray[np.float32]

    @property
    def nbytes(self) -> int:
        """The memory the matrix holds."""
        return int(self.matrix.nbytes)


class FactUnits:
    """Every person's facts as search units (a `MessageUnits` of agent/search/units.py), with what
    this process keeps of them between searches (LRU by people)."""

    def __init__(self, *, max_users: int, max_bytes: int | None = None) -> None:
        self._known: BoundedCache[int, Known] = BoundedCache(max_entries=max_users)
        self._caught_up: BoundedCache[int, FactsVersion] = BoundedCache(max_entries=max_users)
        self._vectors: BoundedCache[int, FactVectors] = BoundedCache(
            max_entries=max_users, max_bytes=max_bytes, size_of=lambda v: v.nbytes
        )

    @classmethod
    def from_settings(cls, settings: SearchSettings) -> FactUnits:
        """Bounded like the search index's vectors: the same people, a share of its bytes."""
        return cls(
            max_users=settings.search_vector_cache_users, max_bytes=settings.search_vector_cache_bytes // 4
        )

    def __len__(self) -> int:
        return len(self._known)

    def holds(self, user_id: int) -> bool:
        """Whether anything of the person's facts is held in this process's memory."""
        return user_id in self._known or user_id in self._vectors

    def forget(self, user_id: int) -> None:
        """Drop what is held of the person's facts (they changed, or the person was deleted)."""
        self._known.pop(user_id)
        self._vectors.pop(user_id)
        self._caught_up.pop(user_id)

    async def state(self, session: AsyncSession, user_id: int, embedder: Embedder | None) -> FactsState:
        """The person's language, their list's version and their fact vectors' version: one statement."""
        name, dimensions = (embedder.name, embedder.dimensions) if embedder is not None else ("", 0)
        row = (
            await session.execute(_state(), {"owner_id": user_id, "embedder": name, "dimensions": dimensions})
        ).one()
        count, newest, changed, sources, said, language, vectors, last_vector = row
        version = (int(count or 0), int(newest or 0), str(changed or ""), int(sources or 0), int(said or 0))
        return FactsState(language, version, (int(vectors or 0), int(last_vector or 0)))

    def caught_up(self, user_id: int, version: FactsVersion) -> bool:
        """Whether the facts of this version were embedded before a recall already (in this process)."""
        return self._caught_up.get(user_id) == version

    def mark_caught_up(self, user_id: int, version: FactsVersion) -> None:
        """The facts of this version were given to the embedder before a recall."""
        self._caught_up.put(user_id, version)

    async def known(
        self,
        session: AsyncSession,
        user_id: int,
        language: str | None = None,
        *,
        version: FactsVersion | None = None,
    ) -> Known:
        """The person's held facts and their words in their language, read again when either changed
        (`version`: as `state` read it, else read here)."""
        read = version or await FactRepository(session).version(user_id)
        stamp = (*read, language or "")
        cached = self._known.get(user_id)
        if cached is not None and cached.version == stamp:
            return cached
        rows = (
            await FactRepository(session).held(user_id, newest_first=True, limit=MAX_FACTS_SCANNED)
            if stamp[0]
            else ()
        )
        facts = tuple(KnownFact.of(row) for row in rows)
        entry = Known(stamp, facts, Postings([f.content for f in facts], language))
        self._known.put(user_id, entry)
        return entry

    async def message_scores(
        self, session: AsyncSession, user_id: int, text: str, *, language: str | None, limit: int
    ) -> dict[int, float]:
        """Each source message's best lexical fact score, relative to the best fact of this query."""
        known = await self.known(session, user_id, language)
        totals = known.postings.scores(text)
        scored = sorted(
            ((score, known.facts[p]) for p, score in totals.items() if known.facts[p].message_ids),
            key=lambda pair: (-pair[0], -pair[1].id),
        )[:limit]
        best = scored[0][0] if scored else 0.0
        out: dict[int, float] = {}
        for score, fact in scored:
            for message_id in fact.message_ids:
                out[message_id] = max(out.get(message_id, 0.0), score / best)
        return out

    async def linked_scores(
        self,
        session: AsyncSession,
        user_id: int,
        seeds: Mapping[int, float],
        *,
        language: str | None,
        limit: int,
    ) -> dict[int, tuple[float, int]]:
        """The source messages of the person's held facts linked to the facts standing on the `seeds`
        (message id -> score). A fact's link words are its words that 2 to `LINK_MAX_HOLDERS` (or 1 in
        20) of the person's facts hold: shared names and rare words, not "the user wants to". Another
        fact is linked when it holds at least `LINK_MIN_SHARE` of the link words' weight (their IDFs
        over the person's facts); each of its messages gets its best seed's score x that share, with
        the seed message it was reached from (a seed too can be reached from another)."""
        if not seeds:
            return {}
        known = await self.known(session, user_id, language)
        postings = known.postings
        cap = max(LINK_MAX_HOLDERS, postings.size // 20)
        out: dict[int, tuple[float, int]] = {}
        for position, fact in enumerate(known.facts):
            sources = [m for m in fact.message_ids if m in seeds]
            if not sources:
                continue
            seed = max(sources, key=lambda m: seeds[m])
            shared: dict[int, float] = {}
            whole = 0.0
            for word in fact_words(fact.content, language):
                holding = postings.words.get(word, [])
                if not 2 <= len(holding) <= cap:
                    continue
                idf = math.log(1 + (postings.size - len(holding) + 0.5) / (len(holding) + 0.5))
                whole += idf
                for other in holding:
                    shared[other] = shared.get(other, 0.0) + idf
            for other, weight in shared.items():
                share = weight / whole
                if other == position or share < LINK_MIN_SHARE:
                    continue
                for message_id in known.facts[other].message_ids:
                    score = seeds[seed] * share
                    if score > out.get(message_id, (0.0, 0))[0]:
                        out[message_id] = (score, seed)
        return dict(sorted(out.items(), key=lambda item: (-item[1][0], -item[0]))[:limit])

    async def vectors(
        self,
        session: AsyncSession,
        user_id: int,
        embedder: Embedder,
        *,
        version: tuple[int, int] | None = None,
    ) -> FactVectors:
        """The person's fact vectors in the embedder's space, read again when rows were written
        (`version`: as `state` read it, else read here)."""
        space = _space(user_id, embedder.name, embedder.dimensions)
        if version is None:
            row = (
                await session.execute(
                    select(func.count(SearchChunk.id), func.max(SearchChunk.id)).where(*space)
                )
            ).one()
            version = (int(row[0] or 0), int(row[1] or 0))
        cached = self._vectors.get(user_id)
        if cached is not None and cached.version == version:
            return cached
        rows = (
            await session.execute(
                select(SearchChunk.digest, SearchChunk.vectors).where(*space).order_by(SearchChunk.id)
            )
        ).all()
        matrix = (
            np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32)
            .reshape(-1, embedder.dimensions)
            .copy()
            if rows
            else np.zeros((0, embedder.dimensions), dtype=np.float32)
        )
        entry = FactVectors(version, {str(r[0]): i for i, r in enumerate(rows)}, matrix)
        self._vectors.put(user_id, entry)
        return entry

    @staticmethod
    async def _drop(session: AsyncSession, chunk_ids: list[int]) -> None:
        if chunk_ids:
            await session.execute(delete(SearchChunk).where(SearchChunk.id.in_(chunk_ids)))

    async def index(self, session: AsyncSession, user_id: int, *, embedder: Embedder, now: datetime) -> int:
        """Embed the person's new or changed facts and drop the rows of facts gone; returns how many
        were embedded (in the caller's transaction)."""
        # Read here, not through `known`: its words are in the person's language, which indexing lacks.
        rows = await FactRepository(session).held(user_id, newest_first=True, limit=MAX_FACTS_SCANNED)
        facts = {fact.digest: fact for fact in map(KnownFact.of, rows)}
        indexed = dict(
            (
                await session.execute(
                    select(SearchChunk.digest, SearchChunk.id).where(
                        SearchChunk.user_id == user_id,
                        SearchChunk.kind == KIND_FACT_CHUNK,
                        SearchChunk.embedder == embedder.name,
                    )
                )
            ).all()
        )
        gone = [chunk_id for digest, chunk_id in indexed.items() if digest not in facts]
        missing = [fact for digest, fact in facts.items() if digest not in indexed]
        if not missing:
            await self._drop(session, gone)
            return 0
        wanted = {i for fact in missing for i in fact.message_ids}
        found = {
            int(r.id): r
            for r in (
                await session.execute(
                    select(
                        TranscriptMessage.id,
                        TranscriptMessage.user_id,
                        TranscriptMessage.day_segment_id,
                        TranscriptMessage.sent_at,
                    ).where(by_ids(TranscriptMessage.id, wanted))
                )
            ).all()
            if r.user_id == user_id  # another user's id is never a source (see turns.by_ids)
        }
        vectors = await embedder.embed([fact.content for fact in missing])
        # Written only once embedded: on SQLite the first write holds the one write lock to the commit.
        await self._drop(session, gone)
        for row, fact in enumerate(missing):
            ids = [i for i in fact.message_ids if i in found]
            session.add(
                SearchChunk(
                    user_id=user_id,
                    day_segment_id=found[ids[0]].day_segment_id if ids else None,
                    kind=KIND_FACT_CHUNK,
                    message_ids=ids,
                    sections=[[0, len(ids)]],
                    first_message_id=ids[0] if ids else None,
                    last_message_id=ids[-1] if ids else None,
                    token_count=0,
                    digest=fact.digest,
                    embedder=embedder.name,
                    dimensions=embedder.dimensions,
                    vectors=np.ascontiguousarray(vectors[row : row + 1], dtype=np.float32).tobytes(),
                    last_sent_at=max((found[i].sent_at for i in ids), default=fact.created_at),
                    created_at=now,
                )
            )
        await session.flush()
        return len(missing)

    async def drop(self, session: AsyncSession, user_id: int, digests: list[str]) -> None:
        """Delete the search rows of facts taken back (their source messages stay searchable as words)."""
        if digests:
            await session.execute(
                delete(SearchChunk).where(
                    SearchChunk.user_id == user_id,
                    SearchChunk.kind == KIND_FACT_CHUNK,
                    SearchChunk.digest.in_(digests),
                )
            )
        self.forget(user_id)
