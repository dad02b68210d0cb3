"""A turn the person stops: the run ends at once, what was written is the answer, the history stays
valid for the real API (the fake Messages API checks every request the next turn sends)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta

import pytest
from pydantic_ai import CancellationToken
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.chat.agent import chat_agent
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.stopped import STOPPED_EMPTY, STOPPED_NOTE
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.anthropic_api import FakeAnthropic, Reply, fake_anthropic_server
from db.models import ModelUsage, TranscriptMessage

MODEL = "anthropic:claude-haiku-4-5"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    yield from fake_anthropic_server()


@dataclass
class StopOnTool:
    """A surface whose person presses stop as soon as a tool starts."""

    cancellation: CancellationToken = field(default_factory=CancellationToken)
    tools: list[str] = field(default_factory=list)

    async def text(self, so_far: str) -> None:
        """Nothing to show."""

    async def tool(self, name: str, doing: str) -> None:
        """Stop."""
        self.tools.append(name)
        self.cancellation.cancel()


async def test_a_stop_during_a_tool_call_ends_the_run_and_the_next_turn_is_valid(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    settings = Settings(
        database_url=database_url,
        model=MODEL,
        anthropic_api_key="test-key",  # type: ignore[arg-type]
        model_max_tokens=1024,
        _env_file=None,
    )
    model = build_model(settings.model, settings)
    started = asyncio.Event()

    async def look_it_up(topic: str) -> str:
        """Look a topic up (slowly)."""
        started.set()
        await asyncio.Event().wait()  # only the stop ends it
        return "never"

    user, _ = await get_or_create_user(sessions, key="cli:eve", now=clock.now(), timezone="UTC", name="Eve")
    progress = StopOnTool()
    async with model.provider:  # type: ignore[attr-defined]
        service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, model=model)
        with chat_agent.override(tools=[look_it_up]):
            fake.script(Reply.tool_call("look_it_up", {"topic": "Maya"}, id="toolu_1", text="Let me look."))
            stopped = await service.reply(
                Incoming(owner=user.id, text="Who is Maya?", sent_at=clock.now()), progress=progress
            )
            after = await service.reply(
                Incoming(owner=user.id, text="never mind", sent_at=clock.now() + timedelta(minutes=1))
            )

    assert progress.tools == ["look_it_up"]
    # The text written before the tool call is the answer; no second model request was made.
    assert stopped.text == "Let me look." and not stopped.failed
    bodies = fake.message_bodies()
    assert len(bodies) == 2
    # The next request carries the stopped exchange as a plain answer with the note, no tool call
    # left without its result (the fake would have answered 400).
    assert after.text == "ok: never mind"
    history = bodies[1]["messages"]
    assert [m["role"] for m in history] == ["user", "assistant", "user"]
    assert history[1]["content"] == [{"type": "text", "text": f"Let me look.\n\n{STOPPED_NOTE}"}]
    async with sessions() as session:
        rows = (
            await session.execute(
                select(TranscriptMessage.role, TranscriptMessage.kind, TranscriptMessage.content).order_by(
                    TranscriptMessage.id
                )
            )
        ).all()
        calls = await session.scalar(select(ModelUsage.calls).where(ModelUsage.kind == "chat"))
    assert [tuple(r) for r in rows] == [
        ("user", "text", "Who is Maya?"),
        ("assistant", "stopped", "Let me look."),
        ("user", "text", "never mind"),
        ("assistant", "text", "ok: never mind"),
    ]
    assert calls == 2  # the stopped run's request is counted, with the next turn's
    assert STOPPED_EMPTY not in stopped.text
