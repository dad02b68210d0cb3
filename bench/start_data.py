"""The populated database `bench start` starts the bot on: people with days of history, built fast.

Rows go in with bulk inserts through the product's models (people, day segments with their
summaries, processed conversations, transcript messages, facts); the search index is then built
by the product's own `Recall.reindex`, with random unit vectors recorded under the real
embedder's name, so the bot finds an index it takes for its own (what is measured is the start,
not search quality). The most recently active people then get messages the index has not seen, as
after a process that stopped before it embedded them: the start's index repair has work to do.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import numpy as np
from sqlalchemy import func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from agent.core.settings import Settings
from agent.search.embeddings import MINILM_DIMENSIONS, InputType, MiniLMEmbedder, Vectors, normalise
from agent.search.recall import Recall
from db.engine import create_engine, session_factory
from db.models import Conversation, DaySegment, TranscriptMessage, User, UserFact

FIRST_TELEGRAM_ID = 700_000
WORDS = (
    "coffee morning work sister garden dog running book movie trip weekend rain dinner cooking music "
    "piano exam project deadline friend train office lunch holiday doctor birthday kitchen bike"
).split()


@dataclass(frozen=True)
class Population:
    """How much history the database holds."""

    people: int
    messages: int  # in all, shared evenly
    lagging_people: int = 8  # the most recently active, whose newest messages the index has not seen
    lagging_messages: int = 30  # each

    @property
    def per_person(self) -> int:
        """Messages each person wrote or read."""
        return max(2, self.messages // self.people)


class RandomVectors:
    """Unit vectors at random under MiniLM's name and width: the index looks made by the real model."""

    name = MiniLMEmbedder.name
    dimensions = MINILM_DIMENSIONS

    def __init__(self) -> None:
        self._rng = np.random.default_rng(7)

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """One random unit row per text."""
        return normalise(self._rng.standard_normal((len(texts), self.dimensions)).astype(np.float32))


def telegram_ids(population: Population) -> list[int]:
    """The people's Telegram ids, the most recently active first."""
    return [FIRST_TELEGRAM_ID + i for i in range(population.people)]


def _line(rng: random.Random) -> str:
    return " ".join(rng.choices(WORDS, k=rng.randint(6, 16)))


async def populate(url: str, population: Population, *, now: datetime, settings: Settings) -> None:
    """Fill a migrated, empty database with `population` and its search index."""
    rng = random.Random(11)
    engine = create_engine(url)
    try:
        days = 5
        per_day = max(1, population.per_person // days)
        start = (now - timedelta(days=days + 1)).replace(hour=9, minute=0, second=0, microsecond=0)
        ids = telegram_ids(population)
        async with engine.begin() as conn:
            await conn.execute(
                insert(User),
                [
                    {
                        "key": f"telegram:{telegram_id}",
                        "telegram_id": telegram_id,
                        "name": f"Person {n}",
                        "timezone": "UTC",
                        "onboarding_status": "complete",
                        "profile": {},
                        "created_at": start,
                    }
                    for n, telegram_id in enumerate(ids)
                ],
            )
            users = list((await conn.scalars(select(User.id).order_by(User.id))).all())
            for n, user_id in enumerate(users):
                # Person 0 spoke last, person 1 a minute before...: the order the start warms people in.
                began = start - timedelta(minutes=n)
                await _history(conn, user_id, rng, start=began, days=days, per_day=per_day)
        sessions = session_factory(engine)
        recall = Recall(
            settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=RandomVectors()
        )
        await recall.reindex(now=now)
        async with engine.begin() as conn:
            for user_id in users[: population.lagging_people]:
                await _unindexed_tail(conn, user_id, rng, count=population.lagging_messages)
            newest = (
                select(func.max(TranscriptMessage.sent_at))
                .where(TranscriptMessage.user_id == User.id)
                .scalar_subquery()
            )
            await conn.execute(update(User).values(last_message_at=newest))
    finally:
        await engine.dispose()


async def _history(
    conn: AsyncConnection, user_id: int, rng: random.Random, *, start: datetime, days: int, per_day: int
) -> None:
    """One person's days: a summarised day segment and a processed conversation each, and 5 facts."""
    day_starts = [start + timedelta(days=d) for d in range(days)]
    segments = await _inserted(
        conn,
        DaySegment,
        [
            {
                "user_id": user_id,
                "day": at.date(),
                "timezone": "UTC",
                "first_message_at": at,
                "last_message_at": at + timedelta(minutes=per_day),
                "message_count": per_day,
                "summary": f"We talked about {rng.choice(WORDS)} and {rng.choice(WORDS)}.",
                "summary_updated_at": at + timedelta(hours=2),
                "key_moments": [],
                "messages_since_summary": 0,
                "summary_due": False,
                "status": "final",
                "finalized_at": at + timedelta(hours=20),
            }
            for at in day_starts
        ],
    )
    conversations = await _inserted(
        conn,
        Conversation,
        [
            {
                "user_id": user_id,
                "status": "processed",
                "started_at": at,
                "last_message_at": at + timedelta(minutes=per_day),
                "ended_at": at + timedelta(minutes=per_day),
                "messages": [],
                "message_count": per_day,
                "summary": "A chat about the day.",
                "processed_at": at + timedelta(hours=1),
            }
            for at in day_starts
        ],
    )
    await conn.execute(
        insert(TranscriptMessage),
        [
            {
                "user_id": user_id,
                "conversation_id": conversations[d],
                "day_segment_id": segments[d],
                "role": "user" if m % 2 == 0 else "assistant",
                "kind": "text",
                "content": _line(rng),
                "sent_at": day_starts[d] + timedelta(minutes=m),
            }
            for d in range(days)
            for m in range(per_day)
        ],
    )
    await conn.execute(
        insert(UserFact),
        [
            {
                "user_id": user_id,
                "content": f"Likes {rng.choice(WORDS)} ({n})",
                "source": "extraction",
                "category": "preference",
                "message_ids": [],
                "dedupe_key": f"bench-{user_id}-{n}",
                "created_at": start,
            }
            for n in range(5)
        ],
    )


async def _inserted(
    conn: AsyncConnection, model: type[DaySegment | Conversation], rows: list[dict[str, Any]]
) -> list[int]:
    """Insert the rows in one statement; their ids, in the rows' order."""
    statement = insert(model).returning(model.id, sort_by_parameter_order=True)
    return list((await conn.execute(statement, rows)).scalars())


async def _unindexed_tail(conn: AsyncConnection, user_id: int, rng: random.Random, *, count: int) -> None:
    """Messages after the indexed history, in the person's last day, that the index has not seen."""
    segment, conversation, last = (
        await conn.execute(
            select(
                TranscriptMessage.day_segment_id, TranscriptMessage.conversation_id, TranscriptMessage.sent_at
            )
            .where(TranscriptMessage.user_id == user_id)
            .order_by(TranscriptMessage.id.desc())
            .limit(1)
        )
    ).one()
    await conn.execute(
        insert(TranscriptMessage),
        [
            {
                "user_id": user_id,
                "conversation_id": conversation,
                "day_segment_id": segment,
                "role": "user" if m % 2 == 0 else "assistant",
                "kind": "text",
                "content": _line(rng),
                "sent_at": last + timedelta(minutes=m + 1),
            }
            for m in range(count)
        ],
    )
