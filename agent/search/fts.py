"""Full-text search behind one interface: SQLite FTS5 or PostgreSQL tsvector, both scoring messages
by BM25 with term frequency saturated at 1 (`length_factor`), in the user's language
(agent/search/language.py).

The indexes maintain themselves (triggers / generated columns, db/ddl/search.py); this module only
turns a free-text query into the dialect's query and reads ranked ids, always for one user.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import TextClause, bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from agent.search.language import Term, lexical_terms
from db.ddl.search import SQLITE_REFILL
from db.models import UTCDateTime
from db.search_text import postgres_config

_WORD = re.compile(r"[^\W_]+")
# Words so common that OR-ing them would match most of a transcript and drown the rare ones.
STOPWORDS = frozenset(
    """a about after again all also am an and any are as at be because been before being but by can
    could did do does doing don for from had has have having he her here hers him his how i if in into
    is it its just me more most my no nor not of off on once only or other our ours out over own same
    she should so some such than that the their theirs them then there these they this those through
    to too under until up very was we were what when where which while who whom why will with would
    you your yours yourself""".split()
)
MAX_TERMS = 24
# How much a message's length, against the average of the messages the query matched, discounts
# the IDFs of the terms it holds (BM25's k1 and b; see `length_factor`).
BM25_K1 = 1.2
BM25_B = 1.0


def query_terms(query: str) -> list[str]:
    """Lower-cased distinct words of a query without stopwords (all words if only stopwords)."""
    words = [w.lower() for w in _WORD.findall(query)]
    kept = [w for w in words if w not in STOPWORDS] or words
    return list(dict.fromkeys(kept))[:MAX_TERMS]


def length_factor(size: float, average: float) -> float:
    """BM25's term weight at a term frequency of 1 for a message of `size` (average `average`),
    with the square root of the relative length.

    A long answer holds most words of any question once; a short message holding them is the
    likelier source. Repeats are not counted: in chat a repeated word says little more. The
    square root keeps the discount mild among chat-length turns (LoCoMo's R@10 holds) while a
    message ten times the average still weighs about half of an average one (BEAM's answers).
    """
    relative = math.sqrt(size / average) if average > 0 else 1.0
    return (BM25_K1 + 1) / (1 + BM25_K1 * (1 - BM25_B + BM25_B * relative))


def docsize_tokens(blob: bytes | None) -> int:
    """The content column's token count from an FTS5 `_docsize` row (varints, one per column)."""
    value = 0
    for byte in blob or b"":
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return value


@dataclass(frozen=True)
class LexicalHit:
    """A message or day segment id and its lexical score (higher is better, > 0)."""

    id: int
    score: float


class FullText(Protocol):
    """Ranked full-text lookups scoped to one user."""

    async def messages(
        self,
        session: AsyncSession,
        user_id: int,
        query: str,
        *,
        limit: int,
        day_segment_id: int | None = None,
        since: datetime | None = None,
        language: str | None = None,
    ) -> list[LexicalHit]:
        """The user's best-matching messages (not system notes), best first."""
        ...

    async def summaries(
        self, session: AsyncSession, user_id: int, query: str, *, limit: int, language: str | None = None
    ) -> list[LexicalHit]:
        """The user's best-matching day summaries (by day segment id), best first."""
        ...

    async def rebuild(self, session: AsyncSession) -> None:
        """Rebuild the full-text indexes from their tables (after a crash or a manual edit)."""
        ...


def _filters(day_segment_id: int | None, since: datetime | None) -> str:
    clauses = ""
    if day_segment_id is not None:
        clauses += " AND m.day_segment_id = :day_segment_id"
    if since is not None:
        clauses += " AND m.sent_at >= :since"
    return clauses


def _typed(sql: str, since: datetime | None) -> TextClause:
    """text() with the UTC datetime type on `:since` (SQLite stores naive UTC strings)."""
    clause = text(sql)
    return clause.bindparams(bindparam("since", type_=UTCDateTime())) if since is not None else clause


def _params(day_segment_id: int | None, since: datetime | None) -> dict[str, object]:
    params: dict[str, object] = {}
    if day_segment_id is not None:
        params["day_segment_id"] = day_segment_id
    if since is not None:
        params["since"] = since
    return params


class SqliteFullText:
    """FTS5 with porter stemming; messages by IDFs and length (`length_factor`), summaries by FTS5's
    bm25 with the user column weighted 0."""

    def __init__(self, *, scan: int = 2000) -> None:
        self.scan = scan

    @staticmethod
    def match(user_id: int, terms: list[Term], column: str) -> str:
        """An FTS5 query: this user's rows matching any term (terms are quoted, so never syntax):
        a stem as a prefix (`"кошк" *`), CJK characters as a phrase (`"猫 叫"`)."""
        alternatives = " OR ".join(f'"{" ".join(t.tokens)}"' + (" *" if t.prefix else "") for t in terms)
        return f'user_id : "{user_id}" AND {{{column}}} : ({alternatives})'

    @staticmethod
    def terms(query: str, language: str | None) -> list[Term]:
        """Terms for the porter-stemmed index: other languages' words are stemmed here."""
        return lexical_terms(query_terms(query), language, stem=(language or "en") != "en")

    async def messages(
        self,
        session: AsyncSession,
        user_id: int,
        query: str,
        *,
        limit: int,
        day_segment_id: int | None = None,
        since: datetime | None = None,
        language: str | None = None,
    ) -> list[LexicalHit]:
        """The user's best-matching messages, best first."""
        terms = self.terms(query, language)
        if not terms:
            return []
        match = self.match(user_id, terms, "content")
        # bm25 is computed for every match: over a long history of common words, rank only the
        # newest `scan` matches (walking rowids without ranking is cheap; FTS5 honours rowid bounds).
        floor = await session.scalar(
            text(
                "SELECT rowid FROM transcript_fts WHERE transcript_fts MATCH :match "
                "ORDER BY rowid DESC LIMIT 1 OFFSET :scan"
            ),
            {"match": match, "scan": self.scan},
        )
        # Same scoring as PostgreSQL: the sum of the IDFs (over the user's messages) of the query
        # terms a message holds, times its BM25 length factor; FTS5 keeps each row's token count.
        keys = [f"m{i}" for i in range(len(terms))]
        matches = {k: self.match(user_id, [t], "content") for k, t in zip(keys, terms, strict=True)}
        counts = ", ".join(
            f"(SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH :{k})" for k in keys
        )
        df_row = (await session.execute(text(f"SELECT {counts}"), matches)).one()
        total = await session.scalar(
            text("SELECT coalesce(sum(message_count), 0) FROM day_segments WHERE user_id = :user_id"),
            {"user_id": user_id},
        )
        n = max(int(total or 0), max((int(d) for d in df_row), default=0), 1)
        idf = [math.log(1 + (n - int(d) + 0.5) / (int(d) + 0.5)) for d in df_row]
        union = " UNION ALL ".join(
            f"SELECT {i} AS k, rowid AS id FROM transcript_fts "
            f"WHERE transcript_fts MATCH :{k} AND rowid > :floor"
            for i, k in enumerate(keys)
        )
        sql = _typed(
            # CROSS JOIN keeps the FTS side outer: probing FTS5 once per message row re-runs the match.
            f"SELECT t.k, t.id, d.sz FROM ({union}) t CROSS JOIN transcript_messages m ON m.id = t.id "
            "LEFT JOIN transcript_fts_docsize d ON d.id = t.id "
            "WHERE m.user_id = :user_id" + _filters(day_segment_id, since),
            since,
        )
        params = {**matches, "floor": floor or 0, "user_id": user_id, **_params(day_segment_id, since)}
        idfs: dict[int, float] = {}
        sizes: dict[int, int] = {}
        for k, message_id, size in await session.execute(sql, params):
            idfs[int(message_id)] = idfs.get(int(message_id), 0.0) + idf[int(k)]
            sizes[int(message_id)] = docsize_tokens(size)
        average = sum(sizes.values()) / len(sizes) if sizes else 1.0
        scores = {i: value * length_factor(sizes[i], average) for i, value in idfs.items()}
        best = sorted(scores.items(), key=lambda item: (-item[1], -item[0]))[:limit]
        return [LexicalHit(i, score) for i, score in best if score > 0]

    async def summaries(
        self, session: AsyncSession, user_id: int, query: str, *, limit: int, language: str | None = None
    ) -> list[LexicalHit]:
        """The user's best-matching day summaries, best first."""
        terms = self.terms(query, language)
        if not terms:
            return []
        sql = text(
            "SELECT d.id, -bm25(day_summary_fts, 1.0, 0.0) AS score FROM day_summary_fts "
            "JOIN day_segments d ON d.id = day_summary_fts.rowid "
            "WHERE day_summary_fts MATCH :match AND d.user_id = :user_id "
            "ORDER BY score DESC, d.day DESC LIMIT :limit"
        )
        params = {"match": self.match(user_id, terms, "summary"), "user_id": user_id, "limit": limit}
        rows = await session.execute(sql, params)
        return [LexicalHit(int(r[0]), float(r[1])) for r in rows if r[1] > 0]

    async def rebuild(self, session: AsyncSession) -> None:
        """Empty both FTS5 tables and fill them again from their content tables."""
        for statement in SQLITE_REFILL:
            await session.execute(text(statement))


class PostgresFullText:
    """Generated tsvector columns (each row under its user's configuration) with GIN indexes;
    messages by IDFs and length (`length_factor`)."""

    def __init__(self, *, scan: int = 2000) -> None:
        self.scan = scan

    @staticmethod
    def tsquery(terms: list[str]) -> str:
        """A to_tsquery string OR-ing the terms (each from `term`)."""
        return " | ".join(terms)

    @staticmethod
    def terms(query: str, language: str | None) -> list[str]:
        """to_tsquery strings: a word (letters and digits only; the configuration stems it), or
        CJK characters that must be adjacent (`猫 <-> 叫`)."""
        terms = lexical_terms(query_terms(query), language, stem=False)
        return [" <-> ".join(t.tokens) if len(t.tokens) > 1 else t.tokens[0] for t in terms]

    async def messages(
        self,
        session: AsyncSession,
        user_id: int,
        query: str,
        *,
        limit: int,
        day_segment_id: int | None = None,
        since: datetime | None = None,
        language: str | None = None,
    ) -> list[LexicalHit]:
        """The user's best-matching messages, best first."""
        terms = self.terms(query, language)
        if not terms:
            return []
        config = _regconfig(language)
        # ts_rank_cd knows no IDF, so common words would outrank rare ones: score each match as
        # the sum of the IDFs (over this user's messages) of the query terms it holds, times its
        # BM25 length factor (`length_factor`; the length in bytes, which needs no detoasting,
        # against the matches' average). Only the newest `scan` matches are scored so a query of
        # common words over a long history stays bounded (vectors are not capped).
        # One statement: the user's matches are found once (through the (user_id, search_tsv) GIN
        # index), then counted per term for the IDFs and the newest `scan` of them scored.
        keys = [f"t{i}" for i in range(len(terms))]
        has = [f"search_tsv @@ to_tsquery({config}, :{k})" for k in keys]
        counts = ", ".join(f"count(*) FILTER (WHERE {h}) AS d{i}" for i, h in enumerate(has))
        greatest = ", ".join(f"d{i}" for i in range(len(keys)))
        idfs = ", ".join(f"ln(1.0 + (n - d{i} + 0.5) / (d{i} + 0.5)) AS w{i}" for i in range(len(keys)))
        idf_sum = " + ".join(f"(CASE WHEN c.{h} THEN w.w{i} ELSE 0.0 END)" for i, h in enumerate(has))
        relative = "sqrt(c.size / greatest(w.average, 1.0))"
        score = f"({idf_sum}) * {BM25_K1 + 1} / (1 + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * {relative}))"
        sql = _typed(
            "WITH hits AS MATERIALIZED ("
            "SELECT m.id, m.search_tsv, m.day_segment_id, m.sent_at, "
            "CAST(octet_length(m.content) AS float8) AS size FROM transcript_messages m "
            # The cast lets the planner use the bigint side of the (user_id, search_tsv) GIN index.
            "WHERE m.user_id = CAST(:user_id AS bigint) AND m.role != 'system' "
            f"AND m.search_tsv @@ to_tsquery({config}, :query)), "
            f"df AS (SELECT {counts}, avg(size) AS average FROM hits), "
            "total AS (SELECT coalesce(sum(message_count), 0) AS messages FROM day_segments "
            "WHERE user_id = CAST(:user_id AS bigint)), "
            f"w AS (SELECT {idfs}, average FROM (SELECT df.*, CAST(greatest(total.messages, {greatest}, 1) "
            "AS float8) AS n FROM df, total) s) "
            f"SELECT c.id, {score} AS score FROM ("
            "SELECT m.id, m.search_tsv, m.size FROM hits m WHERE true"
            + _filters(day_segment_id, since)
            + " ORDER BY m.id DESC LIMIT :scan) c, w ORDER BY score DESC, c.id DESC LIMIT :limit",
            since,
        )
        params = {"query": self.tsquery(terms), "user_id": user_id, "limit": limit, "scan": self.scan}
        params |= dict(zip(keys, terms, strict=True))
        rows = await session.execute(sql, {**params, **_params(day_segment_id, since)})
        return [LexicalHit(int(r[0]), float(r[1])) for r in rows if r[1] > 0]

    async def summaries(
        self, session: AsyncSession, user_id: int, query: str, *, limit: int, language: str | None = None
    ) -> list[LexicalHit]:
        """The user's best-matching day summaries, best first."""
        terms = self.terms(query, language)
        if not terms:
            return []
        sql = text(
            "SELECT d.id, ts_rank_cd(d.summary_tsv, q, 1) AS score "
            f"FROM day_segments d, to_tsquery({_regconfig(language)}, :query) q "
            "WHERE d.user_id = :user_id AND d.summary_tsv @@ q "
            "ORDER BY score DESC, d.day DESC LIMIT :limit"
        )
        rows = await session.execute(sql, {"query": self.tsquery(terms), "user_id": user_id, "limit": limit})
        return [LexicalHit(int(r[0]), float(r[1])) for r in rows if r[1] > 0]

    async def rebuild(self, session: AsyncSession) -> None:
        """Generated columns cannot go stale; only the GIN indexes are rebuilt."""
        await session.execute(text("REINDEX INDEX ix_transcript_search_tsv"))
        await session.execute(text("REINDEX INDEX ix_day_segments_summary_tsv"))


def _regconfig(language: str | None) -> str:
    """The user's configuration as a SQL constant: a name from our own table (db/search_text.py),
    never the user's input. A constant, unlike a cast parameter, lets PostgreSQL parse each
    to_tsquery once per statement rather than once per row it scores."""
    name = postgres_config(language)
    if not name.isascii() or not name.isalpha():
        raise ValueError(f"not a text-search configuration name: {name!r}")
    return f"'{name}'::regconfig"


def full_text_for(dialect: str, *, scan: int = 2000) -> FullText:
    """The implementation for a SQLAlchemy dialect name."""
    if dialect == "sqlite":
        return SqliteFullText(scan=scan)
    if dialect == "postgresql":
        return PostgresFullText(scan=scan)
    raise ValueError(f"no full-text search for dialect {dialect!r}")
