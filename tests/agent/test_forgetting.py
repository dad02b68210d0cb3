"""/forget is final: ids never reused, writers awaited across processes, a store that
fails is finished later, a post-processing run that outlives the user writes nothing."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import func, make_url, select, update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.account.users import get_or_create_user
from agent.account.writers import WriteGuard
from agent.core.errors import UserForgottenError
from agent.core.settings import Settings
from agent.search.fts import full_text_for
from bench.clock import FrozenClock
from db.engine import create_engine, session_factory
from db.models import DaySegment, PendingForget
from jobs.context import JobContext
from jobs.pipeline import run_pipeline
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation
from tests.privacy import full_text_hits, rows_of, text_traces

pytestmark = pytest.mark.both_databases


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Settings on the test database, independent of any .env."""
    return Settings(_env_file=None, database_url=database_url, summary_model="test", model="test")


async def test_a_forgotten_users_id_is_never_given_to_someone_new(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    first, _ = await get_or_create_user(sessions, key="cli:first", now=clock.now(), timezone="UTC")
    assert (await forget_user(sessions, first.id, now=clock.now())).found
    second, created = await get_or_create_user(sessions, key="cli:second", now=clock.now(), timezone="UTC")
    assert created and second.id > first.id
    # The same person coming back is someone new too: a new id, nothing of before.
    again, created = await get_or_create_user(sessions, key="cli:first", now=clock.now(), timezone="UTC")
    assert created and again.id > second.id


class FlakyStore:
    """An external store (like the graph) that is down for the first `failures` deletions."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.rows: dict[int, list[str]] = {}

    async def export_user(self, user_id: int) -> Any:
        return self.rows.get(user_id, [])

    async def forget_user(self, user_id: int) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise OSError("connection refused")
        self.rows.pop(user_id, None)


async def test_a_store_that_is_down_is_finished_by_the_forget_job(
    sessions: async_sessionmaker[AsyncSession], engine: AsyncEngine, clock: FrozenClock, settings: Settings
) -> None:
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    store = FlakyStore(failures=2)
    store.rows[user.id] = ["Ana's secret"]

    outcome = await forget_user(sessions, user.id, [store], now=clock.now())

    assert outcome.found and outcome.stores_pending == ("flaky",)
    # The database part is done at once: no row of the user (the pending record is the bare id).
    rows = await rows_of(sessions, user.id)
    assert rows.pop("pending_forgets") == 1 and set(rows.values()) == {0}
    ctx = JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        summary_model="test",
        worker_id="w",
        data_stores=[store],
    )
    assert await run_job("forget", ctx) == {"pending": 1, "finished": 0, "still_pending": 1}
    async with sessions() as session:
        pending = await session.get(PendingForget, user.id)
        assert (
            pending is not None
            and pending.attempts == 2
            and "connection refused" in (pending.last_error or "")
        )
    assert await run_job("forget", ctx) == {"pending": 1, "finished": 1, "still_pending": 0}
    assert store.rows == {} and set((await rows_of(sessions, user.id)).values()) == {0}


async def test_post_processing_that_outlives_its_user_writes_nothing(
    sessions: async_sessionmaker[AsyncSession], engine: AsyncEngine, clock: FrozenClock, settings: Settings
) -> None:
    scripted = ScriptedSummaries()
    thinking, release = asyncio.Event(), asyncio.Event()

    async def slow_extraction(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        thinking.set()
        await release.wait()
        return scripted(messages, info)

    user_id, conversation_id = await seed_conversation(
        sessions, start=clock.now(), texts=["I live in Lisbon", "Nice"], user_key="cli:ana"
    )
    ctx = JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        summary_model=FunctionModel(slow_extraction),
        worker_id="w",
    )
    run = asyncio.create_task(run_pipeline(ctx, conversation_id))
    await asyncio.wait_for(thinking.wait(), 10)
    await forget_user(sessions, user_id, now=clock.now())
    release.set()
    assert await asyncio.wait_for(run, 30) == {"forgotten": 1}
    assert set((await rows_of(sessions, user_id)).values()) == {0}


async def test_forget_waits_for_a_graph_write_in_another_process(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("several processes need PostgreSQL; SQLite is the single-process embedded default")
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    # Two guards on two engines: what two bot instances behind one webhook have.
    other_engine = create_engine(database_url)
    writer_side = WriteGuard(session_factory(other_engine), engine=other_engine)
    mine = WriteGuard(sessions, engine=engine)
    writing, finish = asyncio.Event(), asyncio.Event()
    wrote: list[str] = []

    async def graph_write() -> None:
        async with writer_side.writing(user.id):
            writing.set()
            await finish.wait()
            wrote.append("episode")

    try:
        writer = asyncio.create_task(graph_write())
        await asyncio.wait_for(writing.wait(), 10)
        forget = asyncio.create_task(forget_user(sessions, user.id, guard=mine, now=clock.now()))
        await asyncio.sleep(0.5)
        assert not forget.done()  # the other instance's write is still in flight
        finish.set()
        await asyncio.wait_for(forget, 10)
        await writer
        assert wrote == ["episode"]  # it finished before forget cleared the stores
        # From now on the other instance writes nothing for this user.
        with pytest.raises(UserForgottenError):
            async with writer_side.writing(user.id):
                wrote.append("late")
        assert wrote == ["episode"]
        async with sessions() as session:
            assert await session.scalar(select(func.count()).select_from(PendingForget)) == 0
    finally:
        await writer_side.close()
        await mine.close()
        await other_engine.dispose()


# Words no tokenizer stems and no other text shares (not even their tails).
ANA_WORDS = ["zqvolkmar", "brimjawtex", "quorpindel", "glaxuvort"]
BO_WORDS = ["wendrafoop", "kyltrabim", "oxpelgrun", "tazmivrock"]


async def two_users_with_words(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> dict[str, int]:
    """Ana and Bo, six days each of messages and day summaries holding their own words."""
    # Many small transactions, as turns write them: the full-text index grows segment by segment.
    users: dict[str, int] = {}
    for day in range(6):
        for key, words in (("cli:ana", ANA_WORDS), ("cli:bo", BO_WORDS)):
            texts = [f"today {word} again, day {day}" for word in words] + ["the weather is fine"]
            users[key], _ = await seed_conversation(
                sessions, start=clock.now() + timedelta(days=day), texts=texts, user_key=key
            )
    async with sessions() as session, session.begin():
        for key, words in (("cli:ana", ANA_WORDS), ("cli:bo", BO_WORDS)):
            await session.execute(
                update(DaySegment)
                .where(DaySegment.user_id == users[key])
                .values(summary=f"## Summary\nTalked about {' and '.join(words)}.")
            )
    return users


async def test_forget_leaves_no_word_of_the_user_in_any_table_or_index(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    users = await two_users_with_words(sessions, clock)
    assert await text_traces(sessions, ANA_WORDS)  # the scan sees the text where it is

    assert (await forget_user(sessions, users["cli:ana"], now=clock.now())).found

    assert await text_traces(sessions, ANA_WORDS) == {}
    assert [await full_text_hits(sessions, word) for word in ANA_WORDS] == [0] * 4
    # Bo's messages and summaries are still found, by the same search the recall tools use.
    search = full_text_for(sessions.kw["bind"].dialect.name)
    async with sessions() as session:
        for word in BO_WORDS:
            assert len(await search.messages(session, users["cli:bo"], word, limit=10)) == 6
            assert len(await search.summaries(session, users["cli:bo"], word, limit=10)) == 6

    if engine.dialect.name == "sqlite":
        # Nor does the file: once the log is checkpointed into it, freed cells and pages hold zeros.
        async with engine.connect() as connection:
            await connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        raw = (await asyncio.to_thread(Path(make_url(database_url).database or "").read_bytes)).lower()
        assert [word for word in ANA_WORDS if word[2:].encode() in raw] == []
        assert [word for word in BO_WORDS if word[2:].encode() in raw] == BO_WORDS
