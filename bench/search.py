"""`python -m bot bench search`: conversation_search latency for one user with many messages among many.

The target user's chunk vectors are random unit vectors stored under the real embedder's name (what
is measured is storage and ranking, not embedding quality); the query is embedded by the real model,
so its cost is part of the figure. Full size: 100,000 messages of the user among 1,000,000.
"""

from __future__ import annotations

import itertools
import random
import time
from datetime import UTC, datetime, timedelta

import numpy as np
from sqlalchemy import insert, select, text, update

from agent.core.settings import Settings
from agent.search.embeddings import MiniLMEmbedder
from agent.search.recall import Recall
from bench.common import describe, scratch_database
from db.engine import create_engine, session_factory
from db.models import DaySegment, SearchChunk, TranscriptMessage, User

START = datetime(2024, 1, 1, 8, 0, tzinfo=UTC)
# Chat-like text: words drawn from a Zipf distribution (s = 1.1) over 20,000 word types, so a few
# words are everywhere and most are rare, as in real conversations; queries use content words of
# middle frequency (ranks 100-3,000).
VOCABULARY = [f"w{rank}" for rank in range(1, 20_001)]
CUMULATIVE = list(itertools.accumulate(1 / rank**1.1 for rank in range(1, 20_001)))
QUERIES = [" ".join(f"w{r}" for r in random.Random(q).sample(range(100, 3_000), 3)) for q in range(20)]
PER_DAY = 40


async def _seed(url: str, users: int, per_user: int, target_messages: int, dims: int) -> int:
    """Store `users` users of `per_user` messages plus one target user; returns the target's id."""
    rng = random.Random(7)
    engine = create_engine(url)
    sessions = session_factory(engine)
    async with engine.begin() as conn:
        await conn.execute(
            insert(User),
            [
                {
                    "key": f"bench:{i}",
                    "timezone": "UTC",
                    "onboarding_status": "done",
                    "profile": {},
                    "created_at": START,
                }
                for i in range(users + 1)
            ],
        )
    async with sessions() as session:
        ids = list((await session.execute(select(User.id).order_by(User.id))).scalars())
    target = ids[0]
    vectors = np.random.default_rng(7)
    for user_id in ids:
        count = target_messages if user_id == target else per_user
        days = (count + PER_DAY - 1) // PER_DAY
        async with engine.begin() as conn:
            await conn.execute(
                insert(DaySegment),
                [
                    {
                        "user_id": user_id,
                        "day": (START + timedelta(days=d)).date(),
                        "timezone": "UTC",
                        "first_message_at": START + timedelta(days=d),
                        "last_message_at": START + timedelta(days=d),
                        "message_count": PER_DAY,
                        "key_moments": [],
                        "messages_since_summary": 0,
                        "summary_due": False,
                        "status": "final",
                    }
                    for d in range(days)
                ],
            )
            segments = list(
                (
                    await conn.execute(
                        select(DaySegment.id).where(DaySegment.user_id == user_id).order_by(DaySegment.day)
                    )
                ).scalars()
            )
            for start in range(0, count, 5_000):
                rows = [
                    {
                        "user_id": user_id,
                        "role": "user" if i % 2 == 0 else "assistant",
                        "kind": "text",
                        "content": " ".join(rng.choices(VOCABULARY, cum_weights=CUMULATIVE, k=12)),
                        "sent_at": START + timedelta(days=i // PER_DAY, minutes=i % PER_DAY),
                        "day_segment_id": segments[i // PER_DAY],
                    }
                    for i in range(start, min(count, start + 5_000))
                ]
                await conn.execute(insert(TranscriptMessage), rows)
            if user_id != target:
                continue
            message_ids = list(
                (
                    await conn.execute(
                        select(TranscriptMessage.id)
                        .where(TranscriptMessage.user_id == target)
                        .order_by(TranscriptMessage.id)
                    )
                ).scalars()
            )
            chunks = []
            for first in range(0, len(message_ids), 16):
                block = message_ids[first : first + 16]
                matrix = vectors.standard_normal((2, dims)).astype(np.float32)
                matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
                chunks.append(
                    {
                        "user_id": target,
                        "day_segment_id": segments[first // PER_DAY],
                        "kind": "messages",
                        "message_ids": block,
                        "sections": [[0, 8], [8, len(block)]],
                        "first_message_id": block[0],
                        "last_message_id": block[-1],
                        "token_count": 10_000,
                        "digest": "bench",
                        "embedder": MiniLMEmbedder.name,
                        "dimensions": dims,
                        "vectors": matrix.tobytes(),
                        "last_sent_at": START + timedelta(days=first // PER_DAY),
                        "created_at": START,
                    }
                )
            for start in range(0, len(chunks), 2_000):
                await conn.execute(insert(SearchChunk), chunks[start : start + 2_000])
    await engine.dispose()
    return target


async def run_search_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print conversation_search p50/p95 per backend (hybrid and full-text only)."""
    target_messages, total = (10_000, 100_000) if quick else (100_000, 1_000_000)
    others = 99
    per_user = (total - target_messages) // others
    embedder = MiniLMEmbedder(threads=settings.embedder_threads)
    embedder.load()
    print(f"conversation_search: one user with {target_messages:,} messages among {total:,}")
    for backend in ("sqlite", "postgres"):
        async with scratch_database(backend) as url:
            if url is None:
                print(f"  {backend}: PostgreSQL unreachable, skipped")
                continue
            started = time.perf_counter()
            target = await _seed(url, others, per_user, target_messages, embedder.dimensions)
            seeded = time.perf_counter() - started
            engine = create_engine(url)
            if engine.dialect.name == "postgresql":
                # A bulk load of 1,000,000 rows wakes autovacuum, which would analyse the tables on
                # the same two cores while the searches are timed; a live database has its
                # statistics already. Settle that first, outside the timings.
                async with engine.connect() as connection:
                    autocommit = await connection.execution_options(isolation_level="AUTOCOMMIT")
                    await autocommit.execute(text("VACUUM ANALYZE"))
            sessions = session_factory(engine)
            now = START + timedelta(days=target_messages // PER_DAY + 1)
            async with sessions() as session, session.begin():
                await session.execute(update(User).where(User.id == target).values(last_message_at=now))
            for mode, chosen in (("hybrid", embedder), ("fts-only", None)):
                recall = Recall(
                    settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=chosen
                )
                t0 = time.perf_counter()
                await recall.search(target, "warm up", now=now)
                first = (time.perf_counter() - t0) * 1000
                # What the bot does: warm up at start (model, recent users' vectors), then search.
                fresh = Recall(
                    settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=chosen
                )
                t0 = time.perf_counter()
                await fresh.warm_up(now=now)
                warm = (time.perf_counter() - t0) * 1000
                t0 = time.perf_counter()
                await fresh.search(target, "what did we talk about last week?", now=now)
                after_start = (time.perf_counter() - t0) * 1000
                timings = []
                for i in range(60):
                    t0 = time.perf_counter()
                    await recall.search(target, QUERIES[i % len(QUERIES)], now=now, limit=6)
                    timings.append((time.perf_counter() - t0) * 1000)
                print(
                    f"  {backend:8} {mode:8} {describe(timings)}  cold {first:.0f} ms; "
                    f"first search after start {after_start:.0f} ms (start-up warm-up {warm:.0f} ms); "
                    f"seeded in {seeded:.0f} s",
                    flush=True,
                )
            await engine.dispose()
