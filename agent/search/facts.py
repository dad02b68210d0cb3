"""`memory_search` / `memory_add` storage: durable user facts, behind a small interface.

Facts live in `user_facts` for now; the knowledge-graph work can swap in another `FactStore`
without touching the tools. Facts per user are few (hundreds), so search scores them in Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.errors import NikitaError, UserForgottenError
from agent.search.fts import query_terms
from db.models import UserFact
from db.repositories.dedupe import fact_dedupe_key
from db.repositories.facts import FactRepository
from db.repositories.users import user_present

MAX_FACTS_SCANNED = 5000


@dataclass(frozen=True)
class FactHit:
    """One stored fact and how well it matches (1.0 = every query word)."""

    fact_id: int
    content: str
    source: str
    created_at: str
    score: float


@dataclass(frozen=True)
class FactAdded:
    """The outcome of `add`: `created` is False when the same fact was already known."""

    fact_id: int
    content: str
    created: bool


class FactRejectedError(NikitaError):
    """A fact the memory policy refuses: empty, too long, or a transcript excerpt."""


def clean_fact(fact: str, *, max_chars: int) -> str:
    """The fact as it is saved (one line, single spaces); the policy of `memory_add` and `update_memory`."""
    text = " ".join(fact.split())
    if not text:
        raise FactRejectedError("fact is empty; write the fact as one short sentence")
    if len(text) > max_chars or fact.count("\n") > 1:
        raise FactRejectedError(
            f"save one short fact (at most {max_chars} characters), not a transcript excerpt"
        )
    return text


class FactStore(Protocol):
    """Durable facts about one user at a time."""

    async def search(self, user_id: int, query: str, *, limit: int) -> list[FactHit]:
        """Facts matching the query, best first; the newest facts when the query is empty."""
        ...

    async def add(
        self,
        user_id: int,
        content: str,
        *,
        conversation_id: int | None,
        at: datetime,
        source: str = "tool",
        category: str | None = None,
    ) -> FactAdded:
        """Store one fact (deduplicated by normalised content); `source` says which tool wrote it."""
        ...


def stem(word: str) -> str:
    """A crude English suffix strip, enough to match "hiking" with "hike" among a user's facts."""
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


class SqlFactStore:
    """Facts in the `user_facts` table."""

    def __init__(self, sessions: async_sessionmaker[AsyncSession]) -> None:
        self.sessions = sessions

    async def search(self, user_id: int, query: str, *, limit: int) -> list[FactHit]:
        """Facts sharing words with the query, scored by the share of query words they hold."""
        async with self.sessions() as session:
            facts = (
                (
                    await session.execute(
                        select(UserFact)
                        .where(UserFact.user_id == user_id, UserFact.invalidated_at.is_(None))
                        .order_by(UserFact.id.desc())
                        .limit(MAX_FACTS_SCANNED)
                    )
                )
                .scalars()
                .all()
            )
        terms = {stem(t) for t in query_terms(query)}
        scored: list[FactHit] = []
        for fact in facts:
            words = {stem(w) for w in query_terms(fact.content)}
            score = len(terms & words) / len(terms) if terms else 0.0
            if terms and score == 0:
                continue
            scored.append(
                FactHit(
                    fact.id,
                    fact.content,
                    fact.source,
                    fact.created_at.isoformat(timespec="minutes"),
                    round(score, 3),
                )
            )
        scored.sort(key=lambda h: (-h.score, -h.fact_id))
        return scored[:limit]

    async def add(
        self,
        user_id: int,
        content: str,
        *,
        conversation_id: int | None,
        at: datetime,
        source: str = "tool",
        category: str | None = None,
    ) -> FactAdded:
        """Insert the fact unless the user already has it."""
        content = content.strip()
        key = fact_dedupe_key(content)
        async with self.sessions() as session, session.begin():
            if not await user_present(session, user_id):
                raise UserForgottenError(f"user {user_id} was forgotten")
            created = await FactRepository(session).add_many(
                user_id, conversation_id, [content], at, source=source, category=category
            )
            fact = await session.scalar(
                select(UserFact).where(UserFact.user_id == user_id, UserFact.dedupe_key == key)
            )
        assert fact is not None  # just inserted or already there, in the same transaction
        return FactAdded(fact.id, fact.content, created > 0)
