"""`python -m bot bench turn`: one turn's overhead with an instant model, by stored-message count.

`--calls` counts instead of timing: the Python function calls of turns 6 to 35 of a conversation (from 0)
(cProfile's count, the interpreter's own builtins included), which do not depend on the machine's
load the way the milliseconds do.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from sqlalchemy import insert

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.service import TurnService
from bench.clock import FrozenClock
from bench.common import describe, scratch_database
from db.engine import create_engine, session_factory
from db.models import Conversation, TranscriptMessage

SIZES = (10, 1_000, 10_000)
# Calls are counted over 30 turns after the conversation's first six (they fill the caches).
CALLS_FROM = 6
CALLS_TURNS = 30
START = datetime(2025, 1, 1, 8, 0, tzinfo=UTC)


async def _instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # async like a provider's model: a plain function would run in a worker thread each turn; and
    # with its usage, as a provider reports it: without, FunctionModel estimates it over the history
    return ModelResponse(parts=[TextPart("ok")], usage=RequestUsage(input_tokens=1_000, output_tokens=1))


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


async def bench_one(
    url: str, stored: int, turns: int, *, warm_up: int = 3, profile: cProfile.Profile | None = None
) -> list[float]:
    """Time `turns` consecutive turns of one user with `stored` earlier messages, after `warm_up`
    turns; with `profile`, the timed turns are profiled too."""
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
    for i in range(turns + warm_up):
        sent = clock.now() + timedelta(seconds=30 * i)
        counted = i >= warm_up
        if counted and profile is not None:
            profile.enable()
        started = time.perf_counter()
        await service.reply(user.id, f"turn {i}: how was your day?", sent)
        if counted:
            timings.append((time.perf_counter() - started) * 1000)
            if profile is not None:
                profile.disable()
    await engine.dispose()
    return timings


async def calls_per_turn(url: str, stored: int) -> float:
    """Python function calls per turn over turns 6 to 35 of a conversation (cProfile's count)."""
    profile = cProfile.Profile()
    turns = await bench_one(url, stored, CALLS_TURNS, warm_up=CALLS_FROM, profile=profile)
    calls = sum(entry[1] for entry in pstats.Stats(profile).stats.values())  # type: ignore[attr-defined]
    return calls / len(turns)


async def run_turn_bench(settings: Settings, *, quick: bool = False, calls: bool = False) -> None:
    """Print p50/p95 per backend and stored-message count, or with `calls` the calls per turn."""
    turns = 20 if quick else 60
    if calls:
        last = CALLS_FROM + CALLS_TURNS - 1
        print(f"turn calls (instant model, cProfile over turns {CALLS_FROM} to {last})")
    else:
        print(f"turn overhead (instant model, {turns} turns each; the session grows as it goes)")
    for backend in ("sqlite", "postgres"):
        for stored in SIZES:
            async with scratch_database(backend) as url:
                if url is None:
                    print(f"  {backend:8} {stored:>6} stored: PostgreSQL unreachable, skipped")
                    continue
                if calls:
                    figure = f"{await calls_per_turn(url, stored):,.0f} Python calls per turn"
                else:
                    figure = describe(await bench_one(url, stored, turns))
                print(f"  {backend:8} {stored:>6} stored: {figure}", flush=True)
