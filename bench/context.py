"""`python -m bot bench context`: the context build with every tier full under each context engine
(v1, v2, shadow), the briefing's cost, and tokens at turn 300."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.context import BuiltContext, ContextBuilder, FactLimits, FunctionFacts
from agent.context.briefing.writer import briefing_instructions, fingerprint, package_prompt
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from bench.common import describe, percentile, scratch_database
from db.engine import create_engine, session_factory
from db.models import Conversation, ConversationThread, DaySegment, TranscriptMessage, User
from db.repositories.briefings import BriefingRepository, StoredBriefing

NOW = datetime(2026, 3, 3, 18, 0, tzinfo=UTC)
START = NOW - timedelta(days=365)
TYPES = ("promise", "question", "follow_up", "topic", "curiosity", "callback")


async def _facts(user_id: int, query: str, limits: FactLimits, now: datetime) -> list[str]:
    return [f"fact {i} about {query[:20]}" for i in range(limits.user)]


def _summary(i: int) -> str:
    return f"## Summary\nDay {i}: they talked about work, the garden and a film.\n\n## Open loops\n- call mum"


async def _seed(url: str, messages: int, days: int, threads: int) -> tuple[User, Conversation]:
    engine = create_engine(url)
    sessions = session_factory(engine)
    async with sessions() as session, session.begin():
        user = User(
            key="cli:bench",
            name="bench",
            timezone="Europe/Berlin",
            profile={"interests": "films"},
            created_at=START,
            last_message_at=NOW - timedelta(hours=30),
        )
        session.add(user)
        await session.flush()
        user_id = user.id
    async with engine.begin() as conn:
        per = max(messages // days, 1)
        await conn.execute(
            insert(Conversation),
            [
                {
                    "user_id": user_id,
                    "status": "processed",
                    "started_at": START + timedelta(days=d),
                    "last_message_at": START + timedelta(days=d, minutes=30),
                    "ended_at": START + timedelta(days=d, minutes=30),
                    "messages": [],
                    "message_count": per,
                    "attempts": 0,
                    "summary": f"Conversation of day {d}.",
                }
                for d in range(days)
            ],
        )
        await conn.execute(
            insert(DaySegment),
            [
                {
                    "user_id": user_id,
                    "day": (START + timedelta(days=d + 1)).date(),
                    "timezone": "Europe/Berlin",
                    "first_message_at": START + timedelta(days=d + 1),
                    "last_message_at": START + timedelta(days=d + 1),
                    "message_count": per,
                    "summary": _summary(d),
                    "key_moments": [f"moment {k}" for k in range(8)],
                    "messages_since_summary": 0,
                    "summary_due": False,
                    "status": "final",
                }
                for d in range(days)
            ],
        )
        for first in range(0, messages, 2000):
            await conn.execute(
                insert(TranscriptMessage),
                [
                    {
                        "user_id": user_id,
                        "role": "user" if i % 2 == 0 else "assistant",
                        "kind": "text",
                        "content": f"message {i} about plans and books",
                        "sent_at": START + timedelta(minutes=50 * i),
                    }
                    for i in range(first, min(messages, first + 2000))
                ],
            )
        await conn.execute(
            insert(ConversationThread),
            [
                {
                    "user_id": user_id,
                    "type": TYPES[i % len(TYPES)],
                    "content": f"open thread {i}",
                    "status": "open" if i % 3 else "resolved",
                    "dedupe_key": f"t{i}",
                    "created_at": NOW - timedelta(hours=9 * i),
                }
                for i in range(threads)
            ],
        )
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user_id,
            status="active",
            started_at=NOW,
            last_message_at=NOW,
            messages=[],
            message_count=0,
        )
        session.add(conversation)
        await session.flush()
        stored_user = await session.get(User, user_id)
        assert stored_user is not None
    await engine.dispose()
    return stored_user, conversation


BRIEFING_TEXT = "\n".join(
    [
        "Who they are now: a film lover in Berlin, busy at work, proud of the garden this year.",
        "What matters today: a long day at work; the tomatoes finally ripened; a film tonight.",
        "How to meet them: relaxed and curious; short questions; no advice unless asked.",
        "To follow up:",
        *(f"- open thread {i}: ask how it went, if it fits" for i in range(5)),
    ]
)
BRIEFING_VOICE = "They love films and live in Berlin. Work is busy. Ask about the tomatoes and the film."
MODES = ("v1", "v2", "shadow")


def _history() -> list[ModelMessage]:
    history: list[ModelMessage] = []
    for i in range(20):
        history += [
            ModelRequest(parts=[UserPromptPart(f"turn {i}: how was the garden?")]),
            ModelResponse(parts=[TextPart(f"answer {i}: the tomatoes are doing well")]),
        ]
    return history


@dataclass(frozen=True)
class EngineRun:
    """One engine's build times and the tokens it sends."""

    timings: list[float]
    # The engine's own part of each build (agent/context/builder.py: snapshot["engine"]["ms"]).
    engine_ms: list[float]
    total_tokens: int
    instructions_tokens: int
    served: str


async def _store_briefing(
    sessions: async_sessionmaker[AsyncSession],
    builder: ContextBuilder,
    user: User,
    conversation: Conversation,
) -> tuple[int, int]:
    """A briefing written from the package the turns will collect; the writer's input and output tokens."""
    settings, counter = builder.settings, get_counter()
    built = await builder.build(
        sessions,
        user=user,
        conversation=conversation,
        text="",
        now=NOW,
        previous_message_at=user.last_message_at,
    )
    assert built.package is not None
    prompt = package_prompt(built.package, BRIEFING_TEXT)
    async with sessions() as session, session.begin():
        await BriefingRepository(session).put(
            StoredBriefing(
                user_id=user.id,
                text=BRIEFING_TEXT,
                voice=BRIEFING_VOICE,
                fingerprint=fingerprint(built.package),
                text_tokens=counter.count(BRIEFING_TEXT),
                voice_tokens=counter.count(BRIEFING_VOICE),
                trigger="conversation",
                conversation_id=None,
                calls=1,
                input_tokens=0,
                output_tokens=0,
                checks={},
                written_at=NOW,
            )
        )
    instructions = briefing_instructions(settings)
    written = counter.count(BRIEFING_TEXT) + counter.count(BRIEFING_VOICE)
    return counter.count(prompt) + counter.count(instructions), written


async def bench_build(url: str, runs: int) -> tuple[dict[str, EngineRun], tuple[int, int]]:
    """Time `runs` context builds per engine, interleaved (all tiers, memory stand-in, a 40-message
    history), and estimate what writing the briefing costs."""
    user, conversation = await _seed(url, 10_000, 365, 1_000)
    engine = create_engine(url)
    sessions = session_factory(engine)
    builders = {
        mode: ContextBuilder(
            Settings(database_url=url, model="test", context_engine=mode, _env_file=None),
            facts=FunctionFacts(_facts),
        )
        for mode in MODES
    }
    cost = await _store_briefing(sessions, builders["v2"], user, conversation)
    history = _history()
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    engine_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
    last: dict[str, BuiltContext] = {}
    for i in range(runs + 5):
        for mode, builder in builders.items():
            started = time.perf_counter()
            last[mode] = await builder.build(
                sessions,
                user=user,
                conversation=conversation,
                text="tomatoes",
                now=NOW + timedelta(seconds=i),
                previous_message_at=user.last_message_at,
                history=history,
            )
            if i >= 5:
                timings[mode].append((time.perf_counter() - started) * 1000)
                engine_ms[mode].append(float(last[mode].snapshot["engine"]["ms"]))
    v1 = last["v1"].snapshot
    assert all(v1["tiers"][t]["present"] for t in ("today", "yesterday", "threads", "memory"))
    assert last["v2"].engine == "v2", last["v2"].snapshot["engine"]
    await engine.dispose()
    results = {
        mode: EngineRun(
            timings[mode],
            engine_ms[mode],
            int(built.snapshot["total_tokens"]),
            int(built.snapshot["instructions_tokens"]),
            built.engine,
        )
        for mode, built in last.items()
    }
    return results, cost


async def tokens_at_turn(url: str, turn: int) -> tuple[int, int]:
    """Tokens the model is sent at turn `turn` of one conversation, against sending the full history."""
    engine = create_engine(url)
    sessions = session_factory(engine)
    settings = Settings(database_url=url, model="test", _env_file=None)

    def summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("They talked at length about their garden and plans. " * 8)])

    builder = ContextBuilder(settings, summary_model=FunctionModel(summary))
    async with sessions() as session, session.begin():
        user = User(key="cli:long", name="long", timezone="UTC", profile={}, created_at=NOW)
        session.add(user)
        await session.flush()
        conversation = Conversation(
            user_id=user.id,
            status="active",
            started_at=NOW,
            last_message_at=NOW,
            messages=[],
            message_count=0,
        )
        session.add(conversation)
    history: list[ModelMessage] = []
    for i in range(turn - 1):
        history += [
            ModelRequest(parts=[UserPromptPart(f"message {i}: a normal chat line about my day, the garden")]),
            ModelResponse(parts=[TextPart(f"reply {i}: that sounds lovely, tell me more about it")]),
        ]
    built = None
    for _ in range(2):  # the second build uses the cached summary, as a later turn would
        built = await builder.build(
            sessions,
            user=user,
            conversation=conversation,
            text="and now?",
            now=NOW,
            previous_message_at=NOW,
            history=history,
        )
    assert built is not None
    counter = get_counter()
    full = counter.count_messages(history) + counter.count(built.text)
    await engine.dispose()
    return int(built.snapshot["total_tokens"]), full


async def run_context_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print p50/p95 of the context build per backend and engine, tokens per engine, the briefing's
    cost, and prompt tokens at turn 300."""
    runs = 30 if quick else 200
    print(f"context build, all tiers: 10,000 messages, 365 day segments, 1,000 threads ({runs} builds each)")
    cost = (0, 0)
    for backend in ("sqlite", "postgres"):
        async with scratch_database(backend) as url:
            if url is None:
                print(f"  {backend:8}: PostgreSQL unreachable, skipped")
                continue
            results, cost = await bench_build(url, runs)
            base = percentile(results["v1"].engine_ms, 50)
            for mode, run in results.items():
                own = percentile(run.engine_ms, 50)
                print(
                    f"  {backend:8} {mode:6}: {describe(run.timings)};"
                    f" engine {own:.3f} ms p50 ({own - base:+.3f} vs v1);"
                    f" {run.total_tokens} tokens ({run.instructions_tokens} instructions),"
                    f" served {run.served}",
                    flush=True,
                )
    print(
        f"briefing write (per processed conversation, and nightly): 1 call,"
        f" about {cost[0]} input and {cost[1]} output tokens for this package"
    )
    async with scratch_database("sqlite") as url:
        assert url is not None
        sent, full = await tokens_at_turn(url, 300)
    print(
        f"prompt tokens at turn 300: {sent} sent vs {full} with the full history"
        f" ({1 - sent / full:.1%} fewer)"
    )
