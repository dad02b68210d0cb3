"""The day's bot-wide token counter equals the sum of the day's usage rows, whoever writes them."""

from __future__ import annotations

import asyncio
from datetime import UTC, date, datetime, timedelta

import pytest
from pydantic_ai.usage import RunUsage
from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.core.usage import Spend, UsageMeter, metering, record_run, store_usage
from agent.turn.transcript import Incoming
from db.ddl.usage import TOKENS
from db.engine import create_engine, session_factory
from db.models import DailyCount, ModelUsage, User
from db.repositories.usage import UsageRepository

pytestmark = pytest.mark.both_databases

DAY = date(2026, 3, 3)
AT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def _users(sessions: async_sessionmaker[AsyncSession], count: int) -> list[int]:
    async with sessions() as session, session.begin():
        users = [User(key=f"cli:u{n}", created_at=AT, timezone="UTC") for n in range(count)]
        session.add_all(users)
        await session.flush()
        return [u.id for u in users]


async def _by_day(sessions: async_sessionmaker[AsyncSession]) -> tuple[dict[date, int], dict[date, int]]:
    """Each day's summed usage rows and each day's counter (days at zero left out of both)."""
    async with sessions() as session:
        sums = await session.execute(
            select(ModelUsage.day, func.sum(ModelUsage.input_tokens + ModelUsage.output_tokens)).group_by(
                ModelUsage.day
            )
        )
        counters = await session.execute(
            select(DailyCount.day, DailyCount.count).where(DailyCount.name == TOKENS)
        )
        return (
            {d: int(n) for d, n in sums if n},
            {d: int(n) for d, n in counters if n},
        )


async def test_the_counter_follows_inserts_upserts_moves_and_deletes(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    alice, bob = await _users(sessions, 2)
    async with sessions() as session, session.begin():
        usage = UsageRepository(session)
        await usage.add(alice, DAY, "chat", calls=1, input_tokens=600, output_tokens=100)
        await usage.add(alice, DAY, "chat", calls=1, input_tokens=50, output_tokens=5)  # the upsert's update
        await usage.add(alice, DAY, "graph", calls=2, input_tokens=250, output_tokens=50)
        await usage.add(bob, DAY, "chat", calls=1, input_tokens=300, output_tokens=0)
        await usage.add(bob, DAY - timedelta(days=1), "chat", calls=1, input_tokens=9999, output_tokens=1)
    sums, counters = await _by_day(sessions)
    assert sums == counters == {DAY: 1355, DAY - timedelta(days=1): 10000}
    async with sessions() as session:
        assert await UsageRepository(session).spent(DAY, alice) == (1355, 1055)
        assert await UsageRepository(session).spent(DAY + timedelta(days=1), alice) == (0, 0)

    async with sessions() as session, session.begin():
        # A row moved to another day, a row shrunk, a row deleted.
        await session.execute(
            update(ModelUsage)
            .where(ModelUsage.user_id == bob, ModelUsage.day == DAY - timedelta(days=1))
            .values(day=DAY + timedelta(days=1))
        )
        await session.execute(
            update(ModelUsage)
            .where(ModelUsage.user_id == alice, ModelUsage.kind == "chat")
            .values(input_tokens=ModelUsage.input_tokens - 50)
        )
        await session.execute(
            delete(ModelUsage).where(ModelUsage.user_id == alice, ModelUsage.kind == "graph")
        )
    sums, counters = await _by_day(sessions)
    assert sums == counters == {DAY: 1005, DAY + timedelta(days=1): 10000}

    # A forgotten user's rows go by ON DELETE CASCADE, and their tokens with them.
    async with sessions() as session, session.begin():
        await session.execute(delete(User).where(User.id == alice))
    sums, counters = await _by_day(sessions)
    assert sums == counters == {DAY: 300, DAY + timedelta(days=1): 10000}


async def test_cache_tokens_add_up_through_the_upsert_and_the_budget_counts_all_input(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    alice, bob = await _users(sessions, 2)
    runs = [
        RunUsage(requests=1, input_tokens=5000, output_tokens=80, cache_write_tokens=4000),
        RunUsage(
            requests=2,
            input_tokens=9000,
            output_tokens=120,
            cache_read_tokens=7000,
            cache_write_tokens=1500,
            cache_write_1h_tokens=500,
        ),
    ]
    for user_id, run in [(alice, runs[0]), (alice, runs[1]), (bob, runs[1])]:
        with metering() as meter:
            record_run("chat", run)
        async with sessions() as session, session.begin():
            await store_usage(session, user_id, DAY, meter)

    async with sessions() as session:
        usage = UsageRepository(session)
        (mine,) = await usage.for_user(alice, since=DAY)
        (everyone,) = await usage.totals_by_kind(since=DAY)
        spent = await usage.spent(DAY, alice)
    counts = (mine.calls, mine.input_tokens, mine.output_tokens)
    cache = (mine.cache_read_tokens, mine.cache_write_tokens, mine.cache_write_1h_tokens)
    assert (counts, cache) == ((3, 14000, 200), (7000, 5500, 500))
    assert (everyone.calls, everyone.cache_read_tokens, everyone.cache_write_1h_tokens) == (5, 14000, 1000)
    # The budgets count every input token, cached or not, and the output: never the cache twice.
    assert spent == (14000 + 200 + 9000 + 120, 14000 + 200)
    sums, counters = await _by_day(sessions)
    assert sums == counters == {DAY: spent[0]}


async def _turns(engine: AsyncEngine, user_ids: list[int], rounds: int) -> None:
    """`rounds` transactions per user, side by side, each storing a turn's usage as the turn does."""
    sessions = session_factory(engine)

    async def one(user_id: int, n: int) -> None:
        meter = UsageMeter()
        meter.add("chat", Spend(calls=1, input_tokens=100 + n, output_tokens=10))
        meter.add("compaction", Spend(calls=1, input_tokens=7, output_tokens=n))
        async with sessions() as session, session.begin():
            await store_usage(session, user_id, DAY, meter)

    for n in range(rounds):
        await asyncio.gather(*(one(user_id, n) for user_id in user_ids))


async def test_two_instances_writing_at_once_keep_the_counter_exact(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    users = await _users(sessions, 4)
    # Two engines are two instances to the database: their own connections and transactions, both
    # adding to the same users' rows and the same day's counter at the same time.
    first, second = create_engine(database_url), create_engine(database_url)
    try:
        await asyncio.gather(_turns(first, users, 15), _turns(second, users, 15))
    finally:
        await first.dispose()
        await second.dispose()
    sums, counters = await _by_day(sessions)
    per_turn = sum(100 + n + 10 + 7 + n for n in range(15))
    assert sums == counters == {DAY: 2 * len(users) * per_turn}
    async with sessions() as session:
        assert await UsageRepository(session).spent(DAY, users[0]) == (
            2 * len(users) * per_turn,
            2 * per_turn,
        )


async def test_two_instances_answering_turns_at_once_keep_the_counter_exact(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agent.core.settings import Settings
    from agent.turn.service import TurnService
    from bench.clock import FrozenClock

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("noted, thanks")])

    users = await _users(sessions, 4)
    engines = [create_engine(database_url), create_engine(database_url)]
    # Two turn services on their own engines: two instances behind one webhook, each taking turns of
    # every user (the users' turn locks keep one user's turns in order across them).
    services = [
        TurnService(
            settings=Settings(database_url=database_url, model="test", _env_file=None),
            engine=engine,
            sessions=session_factory(engine),
            clock=FrozenClock(current=AT),
            model=FunctionModel(answer),
        )
        for engine in engines
    ]
    try:
        await asyncio.gather(
            *(
                services[n % 2].reply(
                    Incoming(owner=user_id, text=f"message {n}", sent_at=AT + timedelta(seconds=n))
                )
                for n in range(10)
                for user_id in users
            )
        )
    finally:
        for service in services:
            await service.close()
        for engine in engines:
            await engine.dispose()
    sums, counters = await _by_day(sessions)
    assert sums and sums == counters
