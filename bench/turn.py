"""`python -m bot bench turn`: one turn's overhead with an instant model, by stored-message count.

Beside each turn, in the same run and interleaved with it, PydanticAI's bare run: a bare `Agent` with
the same instant model and a history that grows the same way (one request and one response a turn),
so the ratio of the two says what the product adds to the run it wraps, whatever the machine's load.

`--calls` counts instead of timing: the Python function calls of turns 6 to 35 of a conversation (from 0)
(cProfile's count, the interpreter's own builtins included), which do not depend on the machine's
load the way the milliseconds do; the bare run's are counted the same way.
"""

from __future__ import annotations

import cProfile
import pstats
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage
from sqlalchemy import insert

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.common import describe, percentile, scratch_database
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


@dataclass
class Timed:
    """The turns' times and, interleaved with them, the bare runs' (ms); with profiles, their calls."""

    turns: list[float] = field(default_factory=list)
    bare: list[float] = field(default_factory=list)
    turn_profile: cProfile.Profile | None = None
    bare_profile: cProfile.Profile | None = None


class BareRun:
    """PydanticAI's bare run: an `Agent` with the instant model, its history growing turn by turn."""

    def __init__(self) -> None:
        self.agent: Agent[None, str] = Agent(FunctionModel(_instant))
        self.history: list[ModelMessage] = []

    async def run(self, text: str) -> None:
        """One run on the history so far; its messages join the history."""
        result = await self.agent.run(text, message_history=self.history or None)
        self.history = result.all_messages()


async def bench_one(url: str, stored: int, turns: int, *, warm_up: int = 3, profile: bool = False) -> Timed:
    """Time `turns` consecutive turns of one user with `stored` earlier messages, after `warm_up`
    turns, each followed by a bare run; with `profile`, the timed turns and bare runs are profiled."""
    settings = Settings(database_url=url, model="test", _env_file=None)
    engine = create_engine(url)
    sessions = session_factory(engine)
    clock = FrozenClock(current=START + timedelta(days=stored // 20 + 2))
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(_instant)
    )
    user, _ = await get_or_create_user(sessions, key="cli:bench", now=START, timezone="UTC", name="bench")
    await _seed(url, user.id, stored)
    timed = Timed()
    if profile:
        timed.turn_profile, timed.bare_profile = cProfile.Profile(), cProfile.Profile()
    bare = BareRun()
    for i in range(turns + warm_up):
        sent = clock.now() + timedelta(seconds=30 * i)
        text = f"turn {i}: how was your day?"
        counted = i >= warm_up
        timed_turn = await _timed(
            service.reply(Incoming(owner=user.id, text=text, sent_at=sent)),
            timed.turn_profile if counted else None,
        )
        timed_bare = await _timed(bare.run(text), timed.bare_profile if counted else None)
        if counted:
            timed.turns.append(timed_turn)
            timed.bare.append(timed_bare)
    await engine.dispose()
    return timed


async def _timed(work: Awaitable[object], profile: cProfile.Profile | None) -> float:
    if profile is not None:
        profile.enable()
    started = time.perf_counter()
    try:
        await work
    finally:
        if profile is not None:
            profile.disable()
    return (time.perf_counter() - started) * 1000


def _calls(profile: cProfile.Profile | None, turns: int) -> float:
    assert profile is not None
    return sum(entry[1] for entry in pstats.Stats(profile).stats.values()) / turns  # type: ignore[attr-defined]


async def calls_per_turn(url: str, stored: int) -> tuple[float, float]:
    """Python function calls per turn and per bare run over turns 6 to 35 of a conversation."""
    timed = await bench_one(url, stored, CALLS_TURNS, warm_up=CALLS_FROM, profile=True)
    return _calls(timed.turn_profile, len(timed.turns)), _calls(timed.bare_profile, len(timed.bare))


def against_bare(timed: Timed) -> str:
    """The turn's p50 / p95 beside the bare run's, and their ratio."""
    ratio = [percentile(timed.turns, p) / percentile(timed.bare, p) for p in (50, 95)]
    return (
        f"{describe(timed.turns)}\n{'':26}bare run: {describe(timed.bare)}\n"
        f"{'':26}turn / bare: p50 {ratio[0]:.1f}x, p95 {ratio[1]:.1f}x"
    )


async def run_turn_bench(settings: Settings, *, quick: bool = False, calls: bool = False) -> None:
    """Print p50/p95 per backend and stored-message count, or with `calls` the calls per turn."""
    turns = 20 if quick else 60
    if calls:
        last = CALLS_FROM + CALLS_TURNS - 1
        print(f"turn calls (instant model, cProfile over turns {CALLS_FROM} to {last})")
    else:
        print(
            f"turn overhead (instant model, {turns} turns each, each beside a bare PydanticAI run; "
            "the session grows as it goes)"
        )
    for backend in ("sqlite", "postgres"):
        for stored in SIZES:
            async with scratch_database(backend) as url:
                if url is None:
                    print(f"  {backend:8} {stored:>6} stored: PostgreSQL unreachable, skipped")
                    continue
                if calls:
                    turn_calls, bare_calls = await calls_per_turn(url, stored)
                    figure = (
                        f"{turn_calls:,.0f} Python calls per turn, {bare_calls:,.0f} per bare run "
                        f"({turn_calls / bare_calls:.1f}x)"
                    )
                else:
                    figure = against_bare(await bench_one(url, stored, turns))
                print(f"  {backend:8} {stored:>6} stored: {figure}", flush=True)
