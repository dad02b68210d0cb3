"""The turn: session-aware history, persistence, failures, duplicates and per-user serialisation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.messages import load_history
from agent.history.turn_notes import words
from agent.turn.run import APOLOGY
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bot.logs import TextFormatter
from db.models import Conversation, GeneratedPrompt, TranscriptMessage, User

pytestmark = pytest.mark.both_databases


class Recorder:
    """A FunctionModel that records every request and answers with the user's last words."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[ModelMessage], AgentInfo]] = []
        self.fail_next = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.calls.append((list(messages), info))
        if self.fail_next:
            self.fail_next -= 1
            raise ModelHTTPError(status_code=529, model_name="fake", body={"error": "overloaded"})
        last = messages[-1]
        prompt = next(words(p) for p in last.parts if isinstance(p, UserPromptPart))
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])

    def user_prompts(self, call: int) -> list[str]:
        """What the person wrote in each user prompt the model saw in one call, in order."""
        messages, _ = self.calls[call]
        return [
            words(p)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart)
        ]


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def service(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    recorder: Recorder,
) -> AsyncIterator[TurnService]:
    turns = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(recorder)
    )
    yield turns
    await turns.close()


async def make_user(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, name: str = "ana") -> int:
    user, _ = await get_or_create_user(
        sessions, key=f"cli:{name}", now=clock.now(), timezone="Europe/Lisbon", name=name
    )
    return user.id


async def test_first_message_has_no_history_and_second_sees_the_first(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, recorder: Recorder
) -> None:
    user_id = await make_user(sessions, clock)
    first = await service.reply(Incoming(owner=user_id, text="I have a cat called Miso", sent_at=clock.now()))
    clock.advance(timedelta(minutes=2))
    second = await service.reply(Incoming(owner=user_id, text="yes", sent_at=clock.now()))

    assert first.new_conversation and not second.new_conversation
    assert recorder.user_prompts(0) == ["I have a cat called Miso"]
    assert recorder.user_prompts(1) == ["I have a cat called Miso", "yes"]
    first_messages, first_info = recorder.calls[0]
    assert len(first_messages) == 1
    assert first_info.instructions is not None and "Name to use: ana" in first_info.instructions
    # The previous answer is in the history the second call received.
    responses = [m for m in recorder.calls[1][0] if isinstance(m, ModelResponse)]
    assert [p.content for r in responses for p in r.parts if isinstance(p, TextPart)] == [
        "echo: I have a cat called Miso"
    ]
    assert second.conversation_id == first.conversation_id


async def test_gap_of_sixteen_minutes_starts_a_new_conversation_and_closes_the_old_one(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, recorder: Recorder
) -> None:
    user_id = await make_user(sessions, clock)
    started = clock.now()
    first = await service.reply(Incoming(owner=user_id, text="hello", sent_at=started))
    clock.advance(timedelta(minutes=16))
    later = await service.reply(Incoming(owner=user_id, text="back again", sent_at=clock.now()))

    assert later.new_conversation
    assert later.closed_conversation_id == first.conversation_id
    assert recorder.user_prompts(1) == ["back again"]
    async with sessions() as session:
        old = await session.get(Conversation, first.conversation_id)
        assert old is not None and old.status == "closed"
        assert old.ended_at == started


async def test_conversation_detection_uses_the_message_time_not_the_clock(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, recorder: Recorder
) -> None:
    user_id = await make_user(sessions, clock)
    start = clock.now()
    await service.reply(Incoming(owner=user_id, text="one", sent_at=start))
    clock.advance(timedelta(hours=5))  # the wall clock moved, the message was sent 3 minutes later
    result = await service.reply(Incoming(owner=user_id, text="two", sent_at=start + timedelta(minutes=3)))
    assert not result.new_conversation
    assert recorder.user_prompts(1) == ["one", "two"]


async def test_everything_is_persisted(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id = await make_user(sessions, clock)
    result = await service.reply(
        Incoming(owner=user_id, text="remember the milk", sent_at=clock.now(), telegram_message_id=7)
    )
    async with sessions() as session:
        rows = (
            (await session.execute(select(TranscriptMessage).order_by(TranscriptMessage.id))).scalars().all()
        )
        conversation = await session.get(Conversation, result.conversation_id)
        prompt = (await session.execute(select(GeneratedPrompt))).scalar_one()
    assert [(r.role, r.content, r.telegram_message_id) for r in rows] == [
        ("user", "remember the milk", 7),
        ("assistant", "echo: remember the milk", None),
    ]
    assert rows[1].reply_to_id == rows[0].id
    assert conversation is not None
    history = load_history(conversation.messages)
    assert len(history) == 2
    assert all(m.instructions is None for m in history if isinstance(m, ModelRequest))
    assert prompt.context_snapshot["message_history_count"] == 0
    assert prompt.message_id == rows[0].id


async def test_model_failure_apologises_keeps_the_message_and_the_next_turn_works(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, recorder: Recorder
) -> None:
    user_id = await make_user(sessions, clock)
    await service.reply(Incoming(owner=user_id, text="first", sent_at=clock.now()))
    recorder.fail_next = 1
    failed = await service.reply(
        Incoming(owner=user_id, text="this one fails", sent_at=clock.now() + timedelta(minutes=1))
    )
    after = await service.reply(
        Incoming(owner=user_id, text="and now?", sent_at=clock.now() + timedelta(minutes=2))
    )

    assert failed.failed and failed.text == APOLOGY
    assert after.text == "echo: and now?"
    assert recorder.user_prompts(2) == ["first", "this one fails", "and now?"]
    async with sessions() as session:
        contents = (
            (await session.execute(select(TranscriptMessage.content).where(TranscriptMessage.role == "user")))
            .scalars()
            .all()
        )
    assert "this one fails" in contents


async def test_a_model_failure_is_logged_with_its_cause_and_without_the_message(
    service: TurnService,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    recorder: Recorder,
    caplog: pytest.LogCaptureFixture,
) -> None:
    user_id = await make_user(sessions, clock)
    recorder.fail_next = 1
    with caplog.at_level(logging.WARNING, logger="agent.turn.run"):
        await service.reply(Incoming(owner=user_id, text="a private worry", sent_at=clock.now()))
    (record,) = [r for r in caplog.records if r.getMessage() == "model call failed"]
    line = TextFormatter().format(record)
    assert "\n" not in line  # a known failure is one line
    assert f"user_id={user_id}" in line
    assert 'error="ModelHTTPError: status_code: 529' in line
    assert "a private worry" not in line


async def test_a_retried_telegram_delivery_produces_one_turn(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, recorder: Recorder
) -> None:
    user_id = await make_user(sessions, clock)
    first = await service.reply(
        Incoming(owner=user_id, text="hi", sent_at=clock.now(), telegram_message_id=100)
    )
    again = await service.reply(
        Incoming(owner=user_id, text="hi", sent_at=clock.now(), telegram_message_id=100)
    )
    assert again.duplicate and again.text == first.text
    assert len(recorder.calls) == 1


async def test_broken_stored_history_degrades_to_a_fresh_start(
    service: TurnService,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    recorder: Recorder,
) -> None:
    user_id = await make_user(sessions, clock)
    result = await service.reply(Incoming(owner=user_id, text="hi", sent_at=clock.now()))
    async with sessions() as session, session.begin():
        conversation = await session.get(Conversation, result.conversation_id)
        assert conversation is not None
        conversation.messages = [{"kind": "nonsense", "parts": 3}]
    # A restarted process (no decoded copy in memory) reads the broken row and starts afresh.
    restarted = TurnService(
        settings=service.settings, engine=engine, sessions=sessions, clock=clock, model=service.model
    )
    answer = await restarted.reply(
        Incoming(owner=user_id, text="still there?", sent_at=clock.now() + timedelta(minutes=1))
    )
    await restarted.close()
    assert answer.text == "echo: still there?"
    assert recorder.user_prompts(1) == ["still there?"]
    # The broken array was replaced, not appended to: the next process reads this turn back.
    again = TurnService(
        settings=service.settings, engine=engine, sessions=sessions, clock=clock, model=service.model
    )
    await again.reply(Incoming(owner=user_id, text="and now?", sent_at=clock.now() + timedelta(minutes=2)))
    await again.close()
    assert recorder.user_prompts(2) == ["still there?", "and now?"]


async def test_tool_calls_round_trip_through_stored_history(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    from agent.chat.agent import chat_agent

    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        if isinstance(messages[-1].parts[-1], UserPromptPart) and len(seen) == 1:
            return ModelResponse(parts=[ToolCallPart("nikita_test_tool", {"word": "x"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("done")])

    def nikita_test_tool(word: str) -> str:
        """Repeat a word."""
        return word * 3

    with chat_agent.override(tools=[nikita_test_tool]):
        service = TurnService(
            settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(model)
        )
        user_id = await make_user(sessions, clock)
        await service.reply(Incoming(owner=user_id, text="use the tool", sent_at=clock.now()))
        await service.reply(
            Incoming(owner=user_id, text="thanks", sent_at=clock.now() + timedelta(minutes=1))
        )
    history = seen[-1]
    calls = [p for m in history for p in m.parts if isinstance(p, ToolCallPart)]
    returns = [p for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [c.tool_call_id for c in calls] == [r.tool_call_id for r in returns] == ["c1"]


async def test_twenty_concurrent_messages_of_one_user(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id = await make_user(sessions, clock)
    base = clock.now()
    results = await asyncio.gather(
        *(
            service.reply(Incoming(owner=user_id, text=f"m{i}", sent_at=base + timedelta(seconds=i)))
            for i in range(20)
        )
    )
    assert sorted(r.text for r in results) == sorted(f"echo: m{i}" for i in range(20))
    async with sessions() as session:
        users = await session.scalar(
            select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.role == "user")
        )
        conversation = (await session.execute(select(Conversation))).scalar_one()
    assert users == 20
    history = load_history(conversation.messages)
    prompts = [words(p) for m in history for p in m.parts if isinstance(p, UserPromptPart)]
    assert sorted(prompts) == sorted(f"m{i}" for i in range(20))
    assert len(history) == 40
    assert all(isinstance(m, ModelRequest if i % 2 == 0 else ModelResponse) for i, m in enumerate(history))


async def test_the_first_clear_message_sets_the_users_language(
    service: TurnService, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user_id = await make_user(sessions, clock)
    await service.reply(Incoming(owner=user_id, text="ок", sent_at=clock.now()))
    async with sessions() as session:
        assert (await session.get(User, user_id)).language is None  # type: ignore[union-attr]
    clock.advance(timedelta(minutes=1))
    await service.reply(
        Incoming(owner=user_id, text="Вчера мы с сестрой ходили в театр", sent_at=clock.now())
    )
    clock.advance(timedelta(minutes=1))
    await service.reply(
        Incoming(owner=user_id, text="Yesterday I went to the theatre with my sister", sent_at=clock.now())
    )
    async with sessions() as session:
        # Set once from the first message that says it; later messages leave it (/language changes it).
        assert (await session.get(User, user_id)).language == "ru"  # type: ignore[union-attr]


async def test_each_turn_appends_to_the_stored_history_and_a_cold_process_reads_it_whole(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    recorder: Recorder,
) -> None:
    user_id = await make_user(sessions, clock)
    first = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(recorder)
    )
    texts = ["café ☕", 'quotes " and \\ backslashes', "日本語も"]
    for n, text in enumerate(texts):
        result = await first.reply(
            Incoming(owner=user_id, text=text, sent_at=clock.now() + timedelta(minutes=n))
        )
    await first.close()
    async with sessions() as session:
        conversation = await session.get(Conversation, result.conversation_id)
    assert conversation is not None and conversation.message_count == 6
    history = load_history(conversation.messages)
    said = [
        words(p) if isinstance(p, UserPromptPart) else p.content
        for m in history
        for p in m.parts
        if isinstance(p, UserPromptPart | TextPart)
    ]
    assert said == [part for text in texts for part in (text, f"echo: {text}")]
    # Another process (nothing cached) goes on from what is stored.
    second = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(recorder)
    )
    await second.reply(Incoming(owner=user_id, text="and now?", sent_at=clock.now() + timedelta(minutes=3)))
    await second.close()
    assert recorder.user_prompts(-1) == [*texts, "and now?"]
