"""The builder degrades: a failing or slow tier is left out and recorded; compaction falls back."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.context import ContextBuilder, FactLimits, FunctionFacts, format_snapshot
from agent.core.errors import NikitaError
from agent.core.settings import Settings
from bench.clock import FrozenClock
from db.models import Conversation, User


def settings_for(url: str, **overrides: object) -> Settings:
    return Settings(database_url=url, model="test", _env_file=None, **overrides)  # type: ignore[arg-type]


async def setup(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock) -> tuple[User, Conversation]:
    user, _ = await get_or_create_user(
        sessions, key="cli:bo", now=clock.now(), timezone="Europe/Berlin", name="Bo"
    )
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user.id, status="active", started_at=clock.now(), last_message_at=clock.now(), messages=[]
        )
        session.add(conversation)
    return user, conversation


def long_history(turns: int) -> list[ModelMessage]:
    words = " ".join(["the garden and the tomatoes"] * 30)
    history: list[ModelMessage] = []
    for i in range(turns):
        history += [
            ModelRequest(parts=[UserPromptPart(f"{i} {words}")]),
            ModelResponse(parts=[TextPart(words)]),
        ]
    return history


async def test_memory_failure_and_timeout_degrade(
    database_url: str, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user, conversation = await setup(sessions, clock)
    seen: list[FactLimits] = []

    async def good(user_id: int, query: str, limits: FactLimits, now: datetime) -> Sequence[str]:
        seen.append(limits)
        return [f"{query} reminds them of their garden"]

    async def broken(user_id: int, query: str, limits: FactLimits, now: datetime) -> Sequence[str]:
        raise NikitaError("graph is down")

    async def slow(user_id: int, query: str, limits: FactLimits, now: datetime) -> Sequence[str]:
        await asyncio.sleep(5)
        return ["never"]

    # The tier's own timeout, long enough for a loaded machine; the slow source gets a short one below.
    settings = settings_for(database_url, context_facts_timeout_seconds=2.0)
    kwargs = dict(
        user=user, conversation=conversation, text="tomatoes", now=clock.now(), previous_message_at=None
    )
    built = await ContextBuilder(settings, facts=FunctionFacts(good)).build(sessions, **kwargs)  # type: ignore[arg-type]
    assert "What you remember:\n- tomatoes reminds them of their garden" in built.text
    assert seen[0].name == "standard"  # an empty history leaves more than 4,000 tokens of the hard cap
    assert built.snapshot["tiers"]["memory"]["limits"] == "standard"
    assert "It's Tuesday morning" in built.text and "this is their first message" in built.text
    assert built.history is None

    built = await ContextBuilder(settings, facts=FunctionFacts(broken)).build(sessions, **kwargs)  # type: ignore[arg-type]
    assert "What you remember" not in built.text
    assert built.snapshot["tiers"]["memory"]["status"] == "failed"
    assert built.snapshot["failures"][0]["error"] == "NikitaError: graph is down"

    hurried = settings_for(database_url, context_facts_timeout_seconds=0.05)
    built = await ContextBuilder(hurried, facts=FunctionFacts(slow)).build(sessions, **kwargs)  # type: ignore[arg-type]
    assert built.snapshot["tiers"]["memory"]["status"] == "timeout"
    assert "<now>\nNow:" in built.text
    shown = format_snapshot(built.snapshot)
    assert "memory" in shown and "timeout" in shown and "Failures:" in shown


async def test_compaction_failure_and_timeout_fall_back_to_truncation(
    database_url: str, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user, conversation = await setup(sessions, clock)
    history = long_history(30)

    async def sleepy(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(5)
        return ModelResponse(parts=[TextPart("late")])

    settings = settings_for(database_url, compaction_timeout_seconds=0.05)
    kwargs = dict(user=user, conversation=conversation, text="hi", now=clock.now(), previous_message_at=None)
    built = await ContextBuilder(settings, summary_model=FunctionModel(sleepy)).build(
        sessions,
        history=history,
        **kwargs,  # type: ignore[arg-type]
    )
    compaction = built.snapshot["history"]["compaction"]
    assert compaction["status"] == "timeout"
    assert (
        built.history is not None
        and built.snapshot["message_history_tokens"] <= settings.history_token_budget
    )
    assert built.snapshot["history"]["dropped_messages"] > 0

    async def summary(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("they grow tomatoes")])

    # A summary that answers at once gets a timeout a loaded machine cannot miss.
    patient = settings_for(database_url, compaction_timeout_seconds=10.0)
    builder = ContextBuilder(patient, summary_model=FunctionModel(summary))
    first = await builder.build(sessions, history=history, **kwargs)  # type: ignore[arg-type]
    assert first.snapshot["history"]["compaction"]["status"] == "new"
    again = await builder.build(sessions, history=history, **kwargs)  # type: ignore[arg-type]
    assert again.snapshot["history"]["compaction"]["status"] == "cached"
    assert again.history == first.history
    # A changed history under the summary invalidates the cache rather than mixing sessions up.
    changed = long_history(31)[2:]
    other = await builder.build(sessions, history=changed, **kwargs)  # type: ignore[arg-type]
    assert other.snapshot["history"]["compaction"]["status"] == "new"
