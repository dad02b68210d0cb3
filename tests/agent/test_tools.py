"""The recall and memory tools through real turns: the model (a FunctionModel) calls them."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionDef, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import SearchChunk, UserFact

pytestmark = pytest.mark.both_databases


class ToolScript:
    """A FunctionModel that makes the scripted tool calls one per request, then answers with the returns."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        self.calls = calls
        self.returns: list[Any] = []
        self.retries: list[str] = []
        self.tool_names: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.tool_names = [t.name for t in info.function_tools]
        last = messages[-1]
        if isinstance(last, ModelRequest):
            for part in last.parts:
                # PydanticAI 2.x reports a tool's ModelRetry as a return with outcome "retried".
                if isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried":
                    self.retries.append(str(getattr(part, "content", "")))
                elif isinstance(part, ToolReturnPart):
                    self.returns.append(part.content)
        turn_start = max(
            i
            for i, m in enumerate(messages)
            if isinstance(m, ModelRequest)
            and any(getattr(p, "part_kind", "") == "user-prompt" for p in m.parts)
        )
        made = sum(1 for m in messages[turn_start:] if isinstance(m, ModelResponse))
        if made < len(self.calls):
            name, args = self.calls[made]
            return ModelResponse(parts=[ToolCallPart(name, json.dumps(args))])
        return ModelResponse(parts=[TextPart("done: " + json.dumps(self.returns[-1:], default=str))])


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


def make_service(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    model: FunctionDef,
) -> tuple[TurnService, Recall]:
    recall = Recall(
        settings=settings,
        sessions=sessions,
        dialect=engine.dialect.name,
        embedder=HashingEmbedder(),
        units=FactUnits.from_settings(settings),
    )
    service = TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=FunctionModel(model),
        recall=recall,
    )
    return service, recall


async def test_search_finds_three_weeks_ago_with_its_day(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    chatter = ToolScript([])
    service, _ = make_service(settings, engine, sessions, clock, chatter)
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="ana")
    then = clock.now()
    told = await service.reply(
        Incoming(owner=user.id, text="My sister Ines is getting married in Porto next June", sent_at=then)
    )
    for day in range(1, 22):  # three weeks of unrelated chat, one session a day
        await service.reply(
            Incoming(
                owner=user.id,
                text=f"day {day}: work was fine, cooked soup",
                sent_at=then + timedelta(days=day),
            )
        )
    # Embeddings follow the turns a moment after (chunks exist), and full text needs no step at all.
    await service.settle()
    async with sessions() as session:
        assert await session.scalar(select(SearchChunk.id).where(SearchChunk.user_id == user.id).limit(1))

    script = ToolScript([("conversation_search", {"query": "sister wedding Porto"})])
    service.model = FunctionModel(script)
    now = then + timedelta(days=21, hours=2)
    result = await service.reply(
        Incoming(owner=user.id, text="do you remember whose wedding is in Porto?", sent_at=now)
    )
    assert "conversation_search" in script.tool_names
    results = script.returns[0]["results"]
    first = results[0]
    assert first["kind"] == "message" and first["message_id"] == told.message_id
    assert first["day_label"] == then.date().isoformat()
    assert "Porto" in first["snippet"] and first["covered_by_summary"] is False
    assert set(first) == {
        "kind",
        "day_label",
        "day_segment_id",
        "message_id",
        "role",
        "speaker",
        "sent_at",
        "when",
        "snippet",
        "next_turn",
        "covered_by_summary",
        "score",
    }
    assert first["speaker"] == "ana" and first["when"].endswith("3 weeks ago")
    assert first["next_turn"]["speaker"] == settings.persona_name  # the reply to it, same day
    assert result.text.startswith("done:")


class OneSearchAnswer:
    """A scripted model: one conversation_search, then an answer read only from what it returned."""

    def __init__(self, query: str) -> None:
        self.query = query
        self.calls = 0
        self.returned: dict[str, Any] = {}

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if not returns:
            self.calls += 1
            return ModelResponse(
                parts=[ToolCallPart("conversation_search", json.dumps({"query": self.query}))]
            )
        self.returned = returns[0].content
        hit = self.returned["results"][0]
        # The answer uses the hit and its neighbours, exactly as a model reading the result would.
        said = " / ".join(
            t["text"] for t in (hit.get("previous_turn"), {"text": hit["snippet"]}, hit.get("next_turn")) if t
        )
        return ModelResponse(parts=[TextPart(f"{hit['when']}, {hit['speaker']} said: {said}")])


@pytest.mark.parametrize("neighbour_chars", [160, 0], ids=["with-neighbours", "without"])
async def test_three_weeks_ago_question_answered_from_one_search(
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    neighbour_chars: int,
) -> None:
    settings = Settings(
        database_url=database_url, model="test", search_neighbour_chars=neighbour_chars, _env_file=None
    )
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    user, _ = await get_or_create_user(sessions, key="cli:bea", now=clock.now(), timezone="UTC", name="Bea")
    then = clock.now()
    # The persona asked about the move; the place is only in Bea's answer, which shares no word with
    # the question asked three weeks later.
    replies = iter(["How is your brother's move abroad going?", "Wonderful!"])
    service.model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart(next(replies, "ok"))]))
    await service.reply(Incoming(owner=user.id, text="Hi! Busy week at home.", sent_at=then))
    await service.reply(
        Incoming(
            owner=user.id,
            text="Great, he landed in Lisbon and loves it there.",
            sent_at=then + timedelta(minutes=1),
        )
    )
    for day in range(1, 22):
        await service.reply(
            Incoming(owner=user.id, text=f"day {day}: quiet, read a book", sent_at=then + timedelta(days=day))
        )
    script = OneSearchAnswer("brother move abroad three weeks ago")
    service.model = FunctionModel(script)
    result = await service.reply(
        Incoming(
            owner=user.id,
            text="Where did I say my brother is moving, three weeks ago?",
            sent_at=then + timedelta(days=21, hours=3),
        )
    )
    assert script.calls == 1  # one search, no conversation_get
    assert "brother" in result.text and "3 weeks ago" in result.text
    if neighbour_chars:
        assert "Lisbon" in result.text  # answered from the hit and its neighbour turns
    else:
        assert "Lisbon" not in result.text  # the hit alone does not hold the answer


async def test_get_and_retry_on_bad_input(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    user, _ = await get_or_create_user(sessions, key="cli:bo", now=clock.now(), timezone="UTC", name="bo")
    stored = await service.reply(Incoming(owner=user.id, text="my bike is red", sent_at=clock.now()))
    other, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="cy")
    script = ToolScript(
        [
            ("conversation_search", {"query": "bike", "day": "last tuesday"}),
            ("conversation_get", {"message_id": stored.message_id}),
        ]
    )
    service.model = FunctionModel(script)
    await service.reply(
        Incoming(owner=other.id, text="what colour is the bike?", sent_at=clock.now() + timedelta(hours=1))
    )
    # Bad day format: the model is asked to retry; another user's id looks like a missing one.
    assert any("YYYY-MM-DD" in r for r in script.retries)
    assert any("no message with id" in r for r in script.retries)
    assert script.returns == []

    # The time arguments: a date each, the first not after the second.
    for arguments, said in (
        ({"from_day": "2026-02-10", "to_day": "2026-02-01"}, "from_day must not be after to_day"),
        ({"to_day": "March"}, "to_day must be a date as YYYY-MM-DD"),
    ):
        ranged = ToolScript([("conversation_search", {"query": "bike", **arguments})])
        service.model = FunctionModel(ranged)
        await service.reply(
            Incoming(owner=other.id, text="the bike?", sent_at=clock.now() + timedelta(hours=1))
        )
        assert any(said in r for r in ranged.retries) and ranged.returns == []

    mine = ToolScript([("conversation_get", {"message_id": stored.message_id})])
    service.model = FunctionModel(mine)
    await service.reply(
        Incoming(owner=user.id, text="what did I say?", sent_at=clock.now() + timedelta(hours=2))
    )
    assert mine.returns[0]["messages"][0]["content"] == "my bike is red"
    assert mine.returns[0]["messages"][0]["role"] == "user"


async def test_memory_add_and_search(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = ToolScript(
        [
            ("memory_add", {"fact": "Is vegetarian"}),
            ("memory_add", {"fact": "is vegetarian."}),
            ("memory_add", {"fact": "x" * 400}),
            ("memory_search", {"query": "vegetarian food"}),
        ]
    )
    service, _ = make_service(settings, engine, sessions, clock, script)
    user, _ = await get_or_create_user(sessions, key="cli:dee", now=clock.now(), timezone="UTC", name="dee")
    await service.reply(Incoming(owner=user.id, text="remember that I'm vegetarian", sent_at=clock.now()))
    assert script.returns[0]["saved"] is True
    assert script.returns[1]["already_known"] is True
    assert any("at most" in r for r in script.retries)
    assert [f["content"] for f in script.returns[2]["facts"]] == ["Is vegetarian"]
    async with sessions() as session:
        facts = (await session.execute(select(UserFact).where(UserFact.user_id == user.id))).scalars().all()
    assert [(f.content, f.source) for f in facts] == [("Is vegetarian", "tool")]


async def test_tools_degrade_without_recall(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = ToolScript([("conversation_search", {"query": "anything"})])
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(script)
    )
    user, _ = await get_or_create_user(sessions, key="cli:eve", now=clock.now(), timezone="UTC", name="eve")
    result = await service.reply(Incoming(owner=user.id, text="remember?", sent_at=clock.now()))
    assert script.returns[0]["results"] == [] and "not available" in script.returns[0]["note"]
    assert not result.failed
