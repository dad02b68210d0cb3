"""`python -m bot bench turn`: one turn's overhead with an instant model, by stored-message count."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import insert

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.service import TurnService
from bench.clock import FrozenClock
from bench.common import describe, scratch_database
from db.engine import create_engine, session_factory
from db.models import Conversation, TranscriptMessage

SIZES = (10, 1_000, 10_000)
START = datetime(2025, 1, 1, 8, 0, tzinfo=UTC)


async def _instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # async like a provider's model: a plain function would run in a worker thread each turn
    return ModelResponse(parts=[TextPart("ok")])


async def _seed(url: str, user_id: int, count: int) -> None:
    """Store `count` messages for the user in closed conversations of 20 messages, one a day."""
    engine = create_engine(url)
    async with engine.begin() as conn:
        for start in range(0, count, 2_000):
            chunk = range(start, min(count, start + 2_000))
            conversations = [
                {
                    "id": 1_000_000 + i // 20,
                    "user_id": user_id,
                    "status": "processed",
                    "started_at": START + timedelta(days=i // 20),
                    "last_message_at": START + timedelta(days=i // 20, minutes=19),
                    "ended_at": START + timedelta(days=i // 20, minutes=19),
                    "messages": [],
                    "message_count": 20,
                    "attempts": 0,
                }
                for i in chunk
                if i % 20 == 0
            ]
            if conversations:
                await conn.execute(insert(Conversation), conversations)
            await conn.execute(
                insert(TranscriptMessage),
                [
                    {
                        "user_id": user_id,
                        "conversation_id": 1_000_000 + i // 20,
                        "role": "user" if i % 2 == 0 else "assistant",
                        "kind": "text",
                        "content": f"message {i}: we talked about plans, books and the weather again",
                        "sent_at": START + timedelta(days=i // 20, minutes=i % 20),
                    }
                    for i in chunk
                ],
            )
    await engine.dispose()


async def bench_one(url: str, stored: int, turns: int) -> list[float]:
    """Time `turns` consecutive turns of one user with `stored` earlier messages."""
    settings = Settings(database_url=url, model="test", _env_file=None)
    engine = create_engine(url)
    sessions = session_factory(engine)
    clock = FrozenClock(current=START + timedelta(days=stored // 20 + 2))
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(_instant)
    )
    user, _ = await get_or_create_user(sessions, key="cli:bench", now=START, timezone="UTC", name="bench")
    await _seed(url, user.id, stored)
    timings: list[float] = []
    for i in range(turns + 3):
        sent = clock.now() + timedelta(seconds=30 * i)
        started = time.perf_counter()
        await service.reply(user.id, f"turn {i}: how was your day?", sent)
        if i >= 3:  # warm-up turns are not counted
            timings.append((time.perf_counter() - started) * 1000)
    await engine.dispose()
    return timings


async def run_turn_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print p50/p95 per backend and stored-message count."""
    turns = 20 if quick else 60
    print(f"turn overhead (instant model, {turns} turns each; the session grows as it goes)")
    for backend in ("sqlite", "postgres"):
        for stored in SIZES:
            async with scratch_database(backend) as url:
                if url is None:
                    print(f"  {backend:8} {stored:>6} stored: PostgreSQL unreachable, skipped")
                    continue
                timings = await bench_one(url, stored, turns)
                print(f"  {backend:8} {stored:>6} stored: {describe(timings)}", flush=True)
