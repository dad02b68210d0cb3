"""Turns in flight: the frame counts each turn while it runs, and `quiet()` waits for a pause."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.activity import Activity
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def test_quiet_waits_until_no_turn_ran_for_the_settle_time() -> None:
    activity = Activity(settle_seconds=0.05)
    assert activity.is_quiet()  # nothing ever ran
    with activity.busy():
        assert activity.in_flight == 1
        assert await activity.quiet(at_most=0.1) is False  # gave up: a turn runs
    assert activity.in_flight == 0 and not activity.is_quiet()  # one just ended
    assert await activity.quiet(at_most=5) is True
    activity.touch()  # the start-up work's start: updates already waiting go first
    assert not activity.is_quiet()


async def test_the_frame_counts_a_turn_while_it_runs(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    seen: list[int] = []
    turns: TurnService | None = None

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert turns is not None
        seen.append(turns.frame.activity.in_flight)
        return ModelResponse(parts=[TextPart("hello")])

    settings = Settings(database_url=database_url, model="test", _env_file=None)
    turns = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(model))
    user, _ = await get_or_create_user(sessions, key="cli:busy", now=NOW, timezone="UTC")
    try:
        await turns.reply(Incoming(owner=user.id, text="hi", sent_at=NOW))
    finally:
        await turns.close()
    assert seen == [1]
    assert turns.frame.activity.in_flight == 0
