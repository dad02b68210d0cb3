"""`python -m bot bench postprocess`: conversations post-processed per second, 1 and 2 worker processes.

The SUMMARY_MODEL is PydanticAI's TestModel (instant, schema-valid output; it estimates tokens
from the real prompts it is sent), so the figure is the pipeline's own cost: claiming, the
stages' transactions, the day-summary rollup and finalisation. Workers are real
`python -m bot jobs run postprocess` processes; the rate is measured from the first claim to the
last `processed_at`, so process start-up is not counted. Model calls and tokens per conversation
come from `model_usage` (what /stats shows): extraction and day summary; the graph is off here
(TestModel cannot drive it), `bench graph` measures it.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select

from agent.core.settings import Settings
from bench.common import scratch_database
from db.engine import create_engine
from db.models import Conversation, DaySegment, ModelUsage, TranscriptMessage, User

START = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
PER_USER = 5
MESSAGES = 4


async def seed(url: str, count: int) -> None:
    """`count` closed conversations of 4 messages, five per user on one day."""
    users = (count + PER_USER - 1) // PER_USER
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(User),
            [
                {"id": u + 1, "key": f"bench:{u}", "timezone": "UTC", "profile": {}, "created_at": START}
                for u in range(users)
            ],
        )
        await conn.execute(
            insert(DaySegment),
            [
                {
                    "id": u + 1,
                    "user_id": u + 1,
                    "day": START.date(),
                    "timezone": "UTC",
                    "first_message_at": START,
                    "last_message_at": START + timedelta(hours=PER_USER),
                    "message_count": PER_USER * MESSAGES,
                    "key_moments": [],
                    "messages_since_summary": PER_USER * MESSAGES,
                }
                for u in range(users)
            ],
        )
        conversations: list[dict[str, Any]] = []
        messages: list[dict[str, Any]] = []
        for c in range(count):
            user, slot = c // PER_USER + 1, c % PER_USER
            at = START + timedelta(hours=slot)
            conversations.append(
                {
                    "id": c + 1,
                    "user_id": user,
                    "status": "closed",
                    "started_at": at,
                    "last_message_at": at + timedelta(minutes=MESSAGES),
                    "ended_at": at + timedelta(minutes=MESSAGES),
                    "messages": [],
                    "message_count": MESSAGES,
                    "attempts": 0,
                }
            )
            messages.extend(
                {
                    "user_id": user,
                    "conversation_id": c + 1,
                    "day_segment_id": user,
                    "role": "user" if m % 2 == 0 else "assistant",
                    "kind": "text",
                    "content": f"conversation {c}, message {m}: the concert, the job offer and the cello",
                    "sent_at": at + timedelta(minutes=m),
                }
                for m in range(MESSAGES)
            )
        await conn.execute(insert(Conversation), conversations)
        for start in range(0, len(messages), 5_000):
            await conn.execute(insert(TranscriptMessage), messages[start : start + 5_000])
        if engine.dialect.name == "postgresql":
            for table in ("users", "day_segments", "conversations"):
                await conn.exec_driver_sql(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
                )
    await engine.dispose()


async def run_workers(url: str, workers: int) -> None:
    """Start `workers` worker processes on the database and wait for all of them."""
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "SUMMARY_MODEL": "test",
        "MODEL": "test",
        "LOG_LEVEL": "WARNING",
    }
    with tempfile.TemporaryDirectory() as folder:  # no .env from the checkout
        procs = [
            await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "bot",
                "jobs",
                "run",
                "postprocess",
                cwd=folder,
                env=env,
                stdout=asyncio.subprocess.DEVNULL,
            )
            for _ in range(workers)
        ]
        codes = [await p.wait() for p in procs]
    if any(codes):
        raise RuntimeError(f"a worker failed: exit codes {codes}")


async def measure(url: str, count: int) -> tuple[int, float, str]:
    """Processed conversations, the seconds from the first claim to the last finalisation, and the
    model calls and tokens per conversation by kind (from `model_usage`, as /stats shows them)."""
    engine = create_engine(url)
    async with engine.connect() as conn:
        row = (
            await conn.execute(
                select(
                    func.count(), func.min(Conversation.claimed_at), func.max(Conversation.processed_at)
                ).where(Conversation.status == "processed")
            )
        ).one()
        usage = (
            await conn.execute(
                select(
                    ModelUsage.kind,
                    func.sum(ModelUsage.calls),
                    func.sum(ModelUsage.input_tokens),
                    func.sum(ModelUsage.output_tokens),
                )
                .group_by(ModelUsage.kind)
                .order_by(ModelUsage.kind)
            )
        ).all()
    await engine.dispose()
    done, first, last = int(row[0]), row[1], row[2]
    if done == 0 or first is None or last is None:
        return 0, 0.0, ""
    spend = "; ".join(
        f"{kind} {int(c) / done:.2f} calls, {int(i) / done:.0f} in / {int(o) / done:.0f} out tokens"
        for kind, c, i, o in usage
    )
    first = first if isinstance(first, datetime) else datetime.fromisoformat(str(first))
    last = last if isinstance(last, datetime) else datetime.fromisoformat(str(last))
    return done, (last - first).total_seconds(), spend


async def bench_one(backend: str, workers: int, count: int) -> str:
    """One run on a fresh scratch database; returns the printed line."""
    async with scratch_database(backend) as url:
        if url is None:
            return f"  {backend:8} {workers} worker(s): PostgreSQL unreachable, skipped"
        await seed(url, count)
        await run_workers(url, workers)
        done, seconds, spend = await measure(url, count)
    rate = done / seconds if seconds > 0 else float("inf")
    return (
        f"  {backend:8} {workers} worker(s): {done}/{count} processed in {seconds:6.2f} s"
        f" = {rate:7.1f} conversations/s\n    per conversation: {spend or 'no model calls recorded'}"
    )


async def run_postprocess_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print conversations per second for SQLite (1 worker) and PostgreSQL (1 and 2 workers)."""
    count = 200 if quick else 1_000
    print(
        f"post-processing throughput (instant TestModel, {count} closed conversations of {MESSAGES} messages)"
    )
    for backend, workers in (("sqlite", 1), ("postgres", 1), ("postgres", 2)):
        print(await bench_one(backend, workers, count), flush=True)
