"""Every turn's exchange is stored whatever fails, and a turn cut short is resumed, never repeated."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.messages import load_history
from agent.history.turn_notes import words
from agent.search.recall import Recall
from agent.turn.run import FAULT_APOLOGY
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import Conversation, TranscriptMessage
from tests.agent.test_tools import ToolScript

pytestmark = pytest.mark.both_databases


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


def echo(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
    return ModelResponse(parts=[TextPart(f"echo: {prompt}")])


def turns(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    model: Callable[[list[ModelMessage], AgentInfo], ModelResponse],
) -> TurnService:
    return TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(model)
    )


async def transcript(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[str, str, str]]:
    async with sessions() as session:
        rows = await session.execute(
            select(TranscriptMessage.role, TranscriptMessage.kind, TranscriptMessage.content).order_by(
                TranscriptMessage.id
            )
        )
        return [tuple(row) for row in rows.all()]  # type: ignore[misc]


async def test_tool_arguments_out_of_range_are_retries_the_model_sees(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recall = Recall(
        settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=HashingEmbedder()
    )
    service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, recall=recall)
    user, _ = await get_or_create_user(sessions, key="cli:bo", now=clock.now(), timezone="UTC", name="bo")
    bad_calls = [
        ("conversation_search", {"query": "bike", "recency_days": 1_000_000}, "recency_days must be at most"),
        ("conversation_get", {"message_id": 2**70}, "message_id must be an id"),
        (
            "conversation_get",
            {"day_segment_id": 1, "from_message_id": -(2**64), "to_message_id": 2**64},
            "from_message_id must be an id",
        ),
    ]
    for n, (tool, args, retry) in enumerate(bad_calls):
        script = ToolScript([(tool, args)])
        service.model = FunctionModel(script)
        result = await service.reply(
            Incoming(owner=user.id, text=f"question {n}", sent_at=clock.now() + timedelta(seconds=n))
        )
        # The model saw a retry it can act on; the turn went on and was answered normally.
        assert not result.failed and result.text.startswith("done:")
        assert len(script.retries) == 1 and retry in script.retries[0], script.retries


async def test_any_exception_from_the_run_stores_the_request_and_an_apology(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    def broken(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise KeyError("a bug somewhere in the run")

    service = turns(settings, engine, sessions, clock, broken)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="cy")
    result = await service.reply(Incoming(owner=user.id, text="hello?", sent_at=clock.now()))
    assert result.failed and result.text == FAULT_APOLOGY
    assert await transcript(sessions) == [("user", "text", "hello?"), ("assistant", "apology", FAULT_APOLOGY)]
    # The stored history pairs the request with the apology, so the next turn runs normally.
    service.model = FunctionModel(echo)
    after = await service.reply(
        Incoming(owner=user.id, text="still there?", sent_at=clock.now() + timedelta(seconds=5))
    )
    assert after.text == "echo: still there?"
    async with sessions() as session:
        raw = await session.scalar(select(Conversation.messages))
    assert len(load_history(raw)) == 4


async def test_text_with_nul_characters_is_stored_and_answered_without_them(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service = turns(settings, engine, sessions, clock, echo)
    user, _ = await get_or_create_user(sessions, key="cli:dee", now=clock.now(), timezone="UTC", name="dee")
    result = await service.reply(
        Incoming(owner=user.id, text="nul\x00here", sent_at=clock.now(), telegram_message_id=1)
    )
    assert result.text == "echo: nulhere" and not result.failed
    assert await transcript(sessions) == [("user", "text", "nulhere"), ("assistant", "text", "echo: nulhere")]


async def test_a_stored_message_without_an_answer_is_answered_once_without_being_stored_again(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    calls: list[str] = []

    def dies_once(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = next(words(p) for p in messages[-1].parts if isinstance(p, UserPromptPart))
        calls.append(str(prompt))
        if len(calls) == 1:
            raise asyncio.CancelledError  # the process stops mid-turn: nothing is stored for it
        return echo(messages, info)

    service = turns(settings, engine, sessions, clock, dies_once)
    user, _ = await get_or_create_user(sessions, key="cli:eve", now=clock.now(), timezone="UTC", name="eve")
    with pytest.raises(asyncio.CancelledError):
        await service.reply(Incoming(owner=user.id, text="first", sent_at=clock.now(), telegram_message_id=7))
    assert await transcript(sessions) == [("user", "text", "first")]

    said = Incoming(owner=user.id, text="first", sent_at=clock.now(), telegram_message_id=7)
    again = await service.reply(said)
    assert (again.text, again.duplicate) == ("echo: first", False)
    # Its caller never sent it (say it stopped): delivered again, the stored answer comes back.
    repeat = await service.reply(said)
    assert (repeat.text, repeat.duplicate) == ("echo: first", True)
    assert await transcript(sessions) == [("user", "text", "first"), ("assistant", "text", "echo: first")]
    assert calls == ["first", "first"]


async def test_a_turn_whose_message_another_worker_answered_meanwhile_gives_that_answer_back(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    # Two processes on one message: the first one's update lease ran out while its model ran, and
    # another took the update over, found the message unanswered and answered it first.
    started, release, calls = asyncio.Event(), asyncio.Event(), []

    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("slow")
        started.set()
        await release.wait()
        return ModelResponse(parts=[TextPart("the stale answer")])

    async def quick(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append("quick")
        return ModelResponse(parts=[TextPart("the answer")])

    stale = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(slow)
    )
    taker = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(quick)
    )
    user, _ = await get_or_create_user(sessions, key="cli:gus", now=clock.now(), timezone="UTC", name="gus")
    said = Incoming(owner=user.id, text="hi", sent_at=clock.now(), telegram_message_id=4)
    first = asyncio.create_task(stale.reply(said))
    await started.wait()
    second = await taker.reply(said)
    release.set()
    late = await first
    assert (second.text, second.duplicate, late.text, late.duplicate) == (
        "the answer",
        False,
        "the answer",
        True,
    )
    # One answer stored, and one exchange in the conversation's history.
    assert await transcript(sessions) == [("user", "text", "hi"), ("assistant", "text", "the answer")]
    async with sessions() as session:
        raw = await session.scalar(select(Conversation.messages))
    assert len(load_history(raw)) == 2 and calls == ["slow", "quick"]
    await stale.close()
    await taker.close()
