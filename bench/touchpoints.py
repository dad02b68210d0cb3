"""`bench touchpoints`: finding due touchpoints among many users, and sending them.

100,000 users (10,000 with --quick), each with a follow-up planned, 1,000 of them due (100): the
time of the due finder (the lease statement on the `(status, due_at)` index, rolled back after each
run), then the `touchpoints` job until nothing is due, through the real Anthropic SDK and
python-telegram-bot against the fake servers: model calls against messages sent, the send rate
(Telegram allows about 30 messages a second), and the model calls of a run with nothing due.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.models import Model
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from sqlalchemy import insert, select
from telegram import Bot

from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.common import describe, scratch_database
from bench.fakes.anthropic_api import FakeAnthropic, Reply
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import TelegramMessenger
from db.engine import create_engine, session_factory
from db.models import Touchpoint, User
from db.repositories.touchpoints import TouchpointRepository
from jobs.context import JobContext
from jobs.registry import run_job

NOW = datetime(2026, 3, 6, 14, 0, tzinfo=UTC)
TOKEN = "123:ABC"
CHUNK = 5000


def _compose(body: dict[str, Any]) -> Reply:
    return Reply.tool_call(body["tools"][0]["name"], {"send": True, "text": "How did it go?"})


async def _seed(url: str, users: int, due: int) -> None:
    """`users` onboarded users, each with one planned follow-up; the first `due` are due now."""
    engine = create_engine(url)
    try:
        for start in range(0, users, CHUNK):
            rows = range(start, min(users, start + CHUNK))
            async with engine.begin() as conn:
                await conn.execute(
                    insert(User),
                    [
                        {
                            "key": f"telegram:{10_000 + i}",
                            "telegram_id": 10_000 + i,
                            "name": f"user {i}",
                            "timezone": "UTC",
                            "onboarding_status": "complete",
                            "profile": {},
                            "created_at": NOW - timedelta(days=30),
                            "last_message_at": NOW - timedelta(days=2),
                        }
                        for i in rows
                    ],
                )
        async with engine.connect() as conn:
            ids = list((await conn.execute(select(User.id).order_by(User.id))).scalars())
        for start in range(0, users, CHUNK):
            async with engine.begin() as conn:
                await conn.execute(
                    insert(Touchpoint),
                    [
                        {
                            "user_id": user_id,
                            "kind": "follow_up",
                            "reason": "the exam on Thursday",
                            # The due ones now; the others over the next 30 days.
                            "due_at": NOW - timedelta(minutes=1)
                            if n < due
                            else NOW + timedelta(minutes=1 + (n * 7919) % (30 * 24 * 60)),
                            "timezone": "UTC",
                            "status": "planned",
                            "dedupe_key": f"bench-{user_id}",
                            "planned_at": NOW - timedelta(days=1),
                            "attempts": 0,
                            "chunks_sent": 0,
                        }
                        for n, user_id in enumerate(ids[start : start + CHUNK], start=start)
                    ],
                )
        if engine.dialect.name == "postgresql":
            async with engine.connect() as conn:
                await conn.exec_driver_sql("ANALYZE")
    finally:
        await engine.dispose()


async def _find_ms(ctx: JobContext, due: int, runs: int) -> list[float]:
    """The due finder's read alone: the ids of the due rows."""
    timings = []
    for _ in range(runs):
        async with ctx.sessions() as session:
            started = time.perf_counter()
            found = list((await session.execute(TouchpointRepository.due_query(NOW, due + 1))).scalars())
            timings.append((time.perf_counter() - started) * 1000)
        assert len(found) == due, f"found {len(found)} due rows, expected {due}"
    return timings


async def _lease_ms(ctx: JobContext, due: int, runs: int) -> list[float]:
    """The lease statement's time (it finds and leases the due rows), rolled back after each run."""
    timings = []
    for _ in range(runs):
        async with ctx.sessions() as session:
            transaction = await session.begin()
            started = time.perf_counter()
            leased = await TouchpointRepository(session).lease_due(
                holder="bench", now=NOW, lease=timedelta(minutes=2), limit=due
            )
            timings.append((time.perf_counter() - started) * 1000)
            await transaction.rollback()
        assert len(leased) == due, f"found {len(leased)} due rows, expected {due}"
    return timings


def _busiest_second(times: list[float]) -> int:
    ordered, most, first = sorted(times), 0, 0
    for last, at in enumerate(ordered):
        while at - ordered[first] >= 1.0:
            first += 1
        most = max(most, last - first + 1)
    return most


async def _deliver(ctx: JobContext, tg: FakeTelegram, server: FakeAnthropic) -> tuple[Counter[str], float]:
    counts: Counter[str] = Counter()
    started = time.perf_counter()
    while True:
        result = await run_job("touchpoints", ctx)
        counts.update({k: v for k, v in result.items() if k != "due"})
        if result["due"] == 0:
            return counts, time.perf_counter() - started


async def run_touchpoints_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the due finder's time and the delivery figures on SQLite and PostgreSQL."""
    users, due = (10_000, 100) if quick else (100_000, 1_000)
    print(f"touchpoints: {users:,} users with a planned follow-up, {due:,} due")
    for backend in ("sqlite", "postgres"):
        async with scratch_database(backend) as url:
            if url is None:
                print(f"  {backend}: PostgreSQL unreachable, skipped")
                continue
            started = time.perf_counter()
            await _seed(url, users, due)
            seeded = time.perf_counter() - started
            engine = create_engine(url)
            sessions = session_factory(engine)
            bench_settings = settings.model_copy(update={"database_url": url, "summary_model": "test"})
            with FakeAnthropic(responder=_compose) as server, FakeTelegram(token=TOKEN) as tg:
                provider = AnthropicProvider(api_key="sk-fake", base_url=server.base_url)
                model: Model = AnthropicModel("claude-haiku-4-5", provider=provider)
                ctx = JobContext(
                    settings=bench_settings,
                    engine=engine,
                    sessions=sessions,
                    clock=FrozenClock(current=NOW),
                    summary_model=TestModel(),
                    worker_id="bench",
                    chat_model=model,
                )
                found = await _find_ms(ctx, due, 20)
                print(f"  {backend:8} find the {due:,} due rows: {describe(found)}", flush=True)
                leased = await _lease_ms(ctx, due, 20)
                print(f"  {backend:8} find and lease them (one statement): {describe(leased)}", flush=True)
                async with Bot(TOKEN, base_url=tg.base_url) as bot:
                    ctx.messenger = TelegramMessenger(bot)
                    counts, seconds = await _deliver(ctx, tg, server)
                    calls = len(server.message_bodies())
                    idle = await run_job("touchpoints", ctx)
                sent = len(tg.sent)
                busiest = _busiest_second([m.at for m in tg.sent])
                print(
                    f"  {backend:8} delivery: {sent:,} sent in {seconds:.1f} s ({sent / seconds:.1f}/s, "
                    f"busiest second {busiest}); model calls {calls:,} "
                    f"(== sent: {calls == sent}); a run with nothing due: {idle} and "
                    f"{len(server.message_bodies()) - calls} model calls; outcomes {dict(counts)}; "
                    f"seeded in {seeded:.0f} s",
                    flush=True,
                )
            await engine.dispose()
