"""Facts as retrieval units: each fact that names its source messages is embedded and matched
lexically, and its score reaches those messages, so a question asked in the fact's words finds the
turns that said it in other words.

A fact is embedded as one row of `search_chunks` (kind `fact`) whose one section holds the fact's
message ids: the vector side reads it like any section and expands it to the messages. The lexical
side scores the user's facts in Python (a user has hundreds of facts, not hundreds of thousands of
messages) with the same IDF weighting as the transcript. Facts without sources (saved by a tool) are
left to `memory_search`. Every query is scoped to one user id, and source ids are checked against
the user's own messages before they are stored in the index.
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import numpy.typing as npt
from sqlalchemy import Text, cast, delete, func, select
from sqlalchemy.ext.asyncio import AsyncSession

from agent.core.bounded import BoundedCache
from agent.search.embeddings import Embedder
from agent.search.facts import stem
from agent.search.fts import query_terms
from agent.search.language import lexical_terms
from agent.search.turns import by_ids
from db.models import SearchChunk, TranscriptMessage, UserFact

KIND_FACT_CHUNK = "fact"


def fact_digest(fact_id: int, content: str, message_ids: list[int]) -> str:
    """What a fact's search row is keyed by: a changed fact is embedded again."""
    raw = f"{fact_id}\x1f{content}\x1f{','.join(map(str, message_ids))}"
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class SourcedFact:
    """A fact of the user and the ids of the messages it comes from."""

    id: int
    content: str
    message_ids: list[int]


async def sourced_facts(
    session: AsyncSession, user_id: int, *, newest: int | None = None
) -> list[SourcedFact]:
    """The user's facts that name at least one source message (only the `newest` facts when given)."""
    stmt = (
        select(UserFact.id, UserFact.content, UserFact.message_ids)
        .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
        .order_by(UserFact.id.desc())
    )
    rows = await session.execute(stmt if newest is None else stmt.limit(newest))
    return [
        SourcedFact(int(i), str(content), sorted({int(m) for m in ids})) for i, content, ids in rows if ids
    ]


async def index_facts(session: AsyncSession, user_id: int, *, embedder: Embedder, now: datetime) -> int:
    """Embed the user's new or changed sourced facts and drop the rows of facts gone; returns how many
    were embedded (in the caller's transaction)."""
    return await (await plan_facts(session, user_id, embedder=embedder)).store(session, now=now)


async def plan_facts(session: AsyncSession, user_id: int, *, embedder: Embedder) -> FactIndexing:
    """What indexing the user's facts takes, the new ones embedded already (nothing is written here:
    the caller writes after every embedding of its pass, see agent/search/indexer.py)."""
    facts = {}
    for fact in await sourced_facts(session, user_id):
        facts[fact_digest(fact.id, fact.content, fact.message_ids)] = fact
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
    plan = FactIndexing(user_id, embedder, gone)
    missing = [(d, f) for d, f in facts.items() if d not in indexed]
    if not missing:
        return plan
    wanted = {i for _, f in missing for i in f.message_ids}
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
    units = [(d, f, [i for i in f.message_ids if i in found]) for d, f in missing]
    for digest, fact, ids in units:
        if ids:
            first = found[ids[0]]
            last_sent = max(found[i].sent_at for i in ids)
            plan.units.append(_FactUnit(digest, fact.content, ids, first.day_segment_id, last_sent))
    if plan.units:
        plan.vectors = await embedder.embed([unit.content for unit in plan.units])
    return plan


@dataclass
class _FactUnit:
    digest: str
    content: str
    message_ids: list[int]
    day_segment_id: int | None
    last_sent_at: datetime


@dataclass
class FactIndexing:
    """A user's fact rows to drop and new facts to store with their vectors."""

    user_id: int
    embedder: Embedder
    gone: list[int]
    units: list[_FactUnit] = field(default_factory=list)
    vectors: npt.NDArray[np.float32] | None = None

    async def store(self, session: AsyncSession, *, now: datetime) -> int:
        """Write it in the caller's transaction; returns how many facts were embedded."""
        if self.gone:
            await session.execute(delete(SearchChunk).where(SearchChunk.id.in_(self.gone)))
        if not self.units or self.vectors is None:
            return 0
        for row, unit in enumerate(self.units):
            session.add(
                SearchChunk(
                    user_id=self.user_id,
                    day_segment_id=unit.day_segment_id,
                    kind=KIND_FACT_CHUNK,
                    message_ids=unit.message_ids,
                    sections=[[0, len(unit.message_ids)]],
                    first_message_id=unit.message_ids[0],
                    last_message_id=unit.message_ids[-1],
                    token_count=0,
                    digest=unit.digest,
                    embedder=self.embedder.name,
                    dimensions=self.embedder.dimensions,
                    vectors=np.ascontiguousarray(self.vectors[row : row + 1], dtype=np.float32).tobytes(),
                    last_sent_at=unit.last_sent_at,
                    created_at=now,
                )
            )
        await session.flush()
        return len(self.units)


def fact_words(text: str, language: str | None) -> set[str]:
    """The words a fact (or a query) is matched by, in the user's language.

    English: lower-cased words with a light suffix strip. Other languages: accents folded and the
    language's Snowball stem, as the transcript's full text reads them; Chinese and Japanese runs as
    pairs of neighbouring characters (they have no spaces to split words at).
    """
    words = query_terms(text)
    if language in (None, "en"):
        return {stem(w) for w in words}
    return {"".join(term.tokens) for term in lexical_terms(words, language, stem=True)}


@dataclass(frozen=True)
class FactWords:
    """A user's newest sourced facts with their words, and the version they were read at."""

    version: tuple[int, int, int, str]
    facts: list[SourcedFact]
    # Word -> the positions in `facts` of the facts holding it.
    postings: dict[str, list[int]]

    @property
    def language(self) -> str | None:
        """The language the words were made in (the version's last part; "" for none)."""
        return self.version[3] or None

    @classmethod
    def of(cls, version: tuple[int, int, int, str], facts: list[SourcedFact]) -> FactWords:
        """Split and stem every fact once."""
        postings: dict[str, list[int]] = {}
        language = version[3] or None
        for position, fact in enumerate(facts):
            for word in fact_words(fact.content, language):
                postings.setdefault(word, []).append(position)
        return cls(version, facts, postings)


class FactWordsCache:
    """The stemmed words of each user's facts, kept between searches (LRU by users).

    Splitting and stemming thousands of facts took longer than the rest of a search; the entry is
    read again when the user's facts change (their count, newest id or sources: another process
    may have written them).
    """

    def __init__(self, *, max_users: int, newest: int) -> None:
        self.newest = newest
        self._entries: BoundedCache[int, FactWords] = BoundedCache(max_entries=max_users)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, user_id: object) -> bool:
        return user_id in self._entries

    def invalidate(self, user_id: int) -> None:
        """Forget a user's entry (they were deleted)."""
        self._entries.pop(user_id)

    async def get(self, session: AsyncSession, user_id: int, language: str | None = None) -> FactWords:
        """The user's facts and words in their language, read again when either changed."""
        row = (
            await session.execute(
                select(
                    func.count(UserFact.id),
                    func.max(UserFact.id),
                    func.sum(func.length(cast(UserFact.message_ids, Text))),
                ).where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
            )
        ).one()
        version = (int(row[0] or 0), int(row[1] or 0), int(row[2] or 0), language or "")
        cached = self._entries.get(user_id)
        if cached is not None and cached.version == version:
            return cached
        facts = await sourced_facts(session, user_id, newest=self.newest) if version[0] else []
        entry = FactWords.of(version, facts)
        self._entries.put(user_id, entry)
        return entry


def fact_lexical(known: FactWords, query: str, *, limit: int) -> dict[int, float]:
    """Each source message's best lexical fact score, relative to the best fact of this query (0-1].

    A fact scores the sum of the IDFs (over the user's facts) of the query words it holds, the
    transcript's weighting; only the best `limit` facts count.
    """
    terms = fact_words(query, known.language)
    facts = known.facts
    if not terms or not facts:
        return {}
    n = len(facts)
    totals: dict[int, float] = {}
    for term in terms:
        holding = known.postings.get(term, [])
        idf = math.log(1 + (n - len(holding) + 0.5) / (len(holding) + 0.5))
        for position in holding:
            totals[position] = totals.get(position, 0.0) + idf
    scored = sorted(
        ((score, facts[position]) for position, score in totals.items()),
        key=lambda pair: (-pair[0], -pair[1].id),
    )[:limit]
    best = scored[0][0] if scored else 0.0
    out: dict[int, float] = {}
    for score, fact in scored:
        for message_id in fact.message_ids:
            out[message_id] = max(out.get(message_id, 0.0), score / best)
    return out
