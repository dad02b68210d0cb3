"""Onboarding: the immutable context, the one message builder (its seven properties), the service."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker, create_async_engine

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.onboarding.context import (
    LOAD_LIMIT,
    PROMPT_LIMIT,
    OnboardingContext,
    build_messages,
    history_entries,
    load_context,
)
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from db.models import TranscriptMessage, User

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
roles = st.sampled_from(["user", "assistant"])
entries = st.lists(st.fixed_dictionaries({"role": roles, "content": st.text(min_size=1)}), max_size=40)


def context_with(history: list[dict[str, Any]]) -> OnboardingContext:
    return OnboardingContext(user_id=1, conversation_history=tuple(history), loaded_at=NOW)


def contents(messages: list[ModelMessage]) -> list[tuple[str, str]]:
    """(role, content) of every user prompt and text part after the system prompt, in order."""
    out: list[tuple[str, str]] = []
    for message in messages:
        for part in message.parts:
            if isinstance(part, UserPromptPart):
                out.append(("user", str(part.content)))
            elif isinstance(part, TextPart):
                out.append(("assistant", part.content))
    return out


def test_context_is_immutable() -> None:
    context = context_with([{"role": "user", "content": "hi"}])
    with pytest.raises(ValidationError):
        context.user_id = 2  # type: ignore[misc]
    with pytest.raises(ValidationError):
        OnboardingContext(user_id="not a number", loaded_at=NOW)  # type: ignore[arg-type]


# Feature: onboarding, Property 1: message structure invariant.
@settings(max_examples=100)
@given(history=entries, message=st.text(min_size=1))
def test_property_1_system_first_current_message_last(history: list[dict[str, str]], message: str) -> None:
    messages = build_messages(context_with(history), message)
    first, last = messages[0], messages[-1]
    assert isinstance(first, ModelRequest) and isinstance(first.parts[0], SystemPromptPart)
    assert isinstance(last, ModelRequest) and isinstance(last.parts[-1], UserPromptPart)
    assert last.parts[-1].content == message


# Feature: onboarding, Properties 2, 3 and 6: the newest 15 messages, as the right types, in order.
@settings(max_examples=100)
@given(history=entries, message=st.text(min_size=1))
def test_properties_2_3_6_history_included_limited_converted(
    history: list[dict[str, str]], message: str
) -> None:
    messages = build_messages(context_with(history), message)
    expected = [(e["role"], e["content"]) for e in history[-PROMPT_LIMIT:]] + [("user", message)]
    assert contents(messages) == expected
    # Requests and responses alternate, so any provider accepts the sequence.
    kinds = [type(m) for m in messages]
    assert all(a is not b for a, b in itertools.pairwise(kinds))


# Feature: onboarding, Property 7: content is never truncated or modified, whatever its length.
@settings(max_examples=100)
@given(content=st.text(min_size=1, max_size=20_000))
def test_property_7_content_preserved(content: str) -> None:
    messages = build_messages(context_with([{"role": "assistant", "content": content}]), content)
    assert contents(messages) == [("assistant", content), ("user", content)]


def test_malformed_history_entries_are_skipped() -> None:
    history: list[dict[str, Any]] = [{"role": "user"}, {"role": "system", "content": "x"}, {"content": 3}]
    history.append({"role": "user", "content": "kept"})
    assert contents(build_messages(context_with(history), "now")) == [("user", "kept"), ("user", "now")]


def _row(i: int, sent_at: datetime) -> TranscriptMessage:
    return TranscriptMessage(
        id=i,
        user_id=1,
        role="user" if i % 2 else "assistant",
        kind="onboarding",
        content=f"m{i}",
        sent_at=sent_at,
    )


# Feature: onboarding, Properties 4 and 5: at most the newest 20, oldest first, as role/content dicts.
@settings(max_examples=100)
@given(offsets=st.lists(st.integers(min_value=0, max_value=10_000), max_size=60))
def test_properties_4_5_loading_orders_limits_and_formats(offsets: list[int]) -> None:
    rows = [_row(i, NOW + timedelta(seconds=s)) for i, s in enumerate(offsets)]
    loaded = history_entries(rows)
    newest = sorted(rows, key=lambda r: (r.sent_at, r.id))[-LOAD_LIMIT:]
    assert loaded == [{"role": r.role, "content": r.content} for r in newest]
    assert len(loaded) == min(len(rows), LOAD_LIMIT)


async def test_load_context_reads_the_newest_onboarding_messages(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    user, _ = await get_or_create_user(
        sessions, key="t:1", now=NOW, timezone="UTC", onboarding_status="pending"
    )
    async with sessions() as session, session.begin():
        for i in range(25):
            session.add(
                TranscriptMessage(
                    user_id=user.id,
                    role="user",
                    kind="onboarding",
                    content=f"m{i}",
                    sent_at=NOW + timedelta(seconds=i),
                )
            )
        session.add(
            TranscriptMessage(
                user_id=user.id, role="user", kind="text", content="not onboarding", sent_at=NOW
            )
        )
    context = await load_context(sessions, user, NOW)
    assert [e["content"] for e in context.conversation_history] == [f"m{i}" for i in range(5, 25)]


async def test_load_context_degrades_to_empty_history(tmp_path: Path) -> None:
    user = User(id=1, key="t:1", timezone="UTC", name=None, profile={}, created_at=NOW)
    # A database without the transcript table: the query fails, the turn must not.
    engine = create_async_engine(f"sqlite+aiosqlite:///{tmp_path / 'empty.db'}")
    context = await load_context(async_sessionmaker(engine), user, NOW)
    await engine.dispose()
    assert context.conversation_history == () and context.user_id == 1


class ScriptedOnboarding:
    """A model that saves what it is told by calling the tools, then finishes."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        last = messages[-1]
        # PydanticAI 2.x returns a ModelRetry from a tool as a tool return with outcome "retried".
        if any(getattr(p, "outcome", None) == "retried" for p in last.parts):
            return ModelResponse(parts=[TextPart("which city was that?")])
        if any(isinstance(p, ToolReturnPart) for p in last.parts):
            return ModelResponse(parts=[TextPart("noted")])
        text = str(last.parts[-1].content) if isinstance(last.parts[-1], UserPromptPart) else ""
        calls = {
            "Sam": [ToolCallPart("set_name", {"name": "Sam"})],
            "Narnia": [ToolCallPart("set_timezone", {"place_or_zone": "Narnia"})],
            "Lisbon": [ToolCallPart("set_timezone", {"place_or_zone": "I'm in Lisbon"})],
            "early": [ToolCallPart("finish_onboarding", {})],
            "done": [
                ToolCallPart("add_interest", {"interest": "chess"}),
                ToolCallPart("add_boundary", {"boundary": "no politics"}),
                ToolCallPart("finish_onboarding", {}),
            ],
        }
        for key, parts in calls.items():
            if key in text:
                return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart("hello! what should I call you?")])


def onboarding_turns(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], model: ScriptedOnboarding
) -> TurnService:
    settings = Settings(database_url=str(engine.url), model="test", _env_file=None)  # type: ignore[call-arg]
    return TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(model))


async def test_service_collects_the_profile_and_completes(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    model = ScriptedOnboarding()
    service = onboarding_turns(engine, sessions, model)
    user, _ = await get_or_create_user(
        sessions, key="t:1", now=NOW, timezone="UTC", onboarding_status="pending"
    )
    steps = ["/start", "I'm Sam", "early?", "I live in Narnia", "Lisbon then", "done"]
    replies = []
    for i, text in enumerate(steps):
        reply = await service.onboard(
            Incoming(owner=user.id, text=text, sent_at=NOW + timedelta(seconds=i), telegram_message_id=i + 1)
        )
        assert reply is not None
        replies.append(reply)
    assert [r.complete for r in replies] == [False] * 5 + [True]
    # Finishing without a place, or an unknown place, is retried by the model, never stored.
    assert [r.text for r in replies[2:4]] == ["which city was that?"] * 2
    async with sessions() as session:
        stored = await session.get(User, user.id)
        assert stored is not None
        assert (stored.name, stored.timezone, stored.onboarding_status) == (
            "Sam",
            "Europe/Lisbon",
            "complete",
        )
        assert stored.profile["interests"] == ["chess"] and stored.profile["boundaries"] == ["no politics"]
        rows = (await session.execute(select(TranscriptMessage.kind))).scalars().all()
    assert set(rows) == {"onboarding"} and len(rows) == 12
    # The last request saw the earlier onboarding messages and what was already collected.
    system = model.requests[-3][0].parts[0]
    assert isinstance(system, SystemPromptPart) and "name: Sam" in system.content
    # Once complete, messages are not onboarding's any more; a retried message is not answered twice.
    assert (
        await service.onboard(Incoming(owner=user.id, text="hi", sent_at=NOW + timedelta(minutes=1))) is None
    )


async def test_a_repeated_telegram_message_is_one_onboarding_turn(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    model = ScriptedOnboarding()
    service = onboarding_turns(engine, sessions, model)
    user, _ = await get_or_create_user(
        sessions, key="t:1", now=NOW, timezone="UTC", onboarding_status="pending"
    )
    first = await service.onboard(Incoming(owner=user.id, text="/start", sent_at=NOW, telegram_message_id=7))
    again = await service.onboard(Incoming(owner=user.id, text="/start", sent_at=NOW, telegram_message_id=7))
    assert first is not None and again is not None and again.duplicate and again.text == first.text
    assert len(model.requests) == 1
