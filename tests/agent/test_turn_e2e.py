"""The turn end to end: the real Anthropic SDK through PydanticAI against a local Messages API."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.turn.run import APOLOGY
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.anthropic_api import ApiError, FakeAnthropic, Reply, fake_anthropic_server
from db.models import TranscriptMessage

# Not the default model: the SDK warns that claude-sonnet-4-5 is deprecated, and warnings fail tests.
MODEL = "anthropic:claude-haiku-4-5"


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    yield from fake_anthropic_server()


def _settings(database_url: str, *, max_tokens: int | None) -> Settings:
    return Settings(
        database_url=database_url,
        model=MODEL,
        anthropic_api_key="test-key",  # type: ignore[arg-type]
        model_max_tokens=max_tokens,
        _env_file=None,
    )


def _roles(body: dict[str, object]) -> list[str]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return [str(m["role"]) for m in messages]


# A 1024-token cap: a plain JSON request; no cap: the model's maximum, which PydanticAI streams (SSE).
@pytest.mark.parametrize("max_tokens", [1024, None], ids=["json", "sse"])
async def test_three_turns_with_a_tool_call_and_an_outage(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    max_tokens: int | None,
) -> None:
    # The SDK's own variable is how deployments point it at a proxy; no setting of ours is involved.
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    settings = _settings(database_url, max_tokens=max_tokens)
    model = build_model(settings.model, settings)
    from agent.chat.agent import chat_agent

    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    user, _ = await get_or_create_user(sessions, key="cli:eve", now=clock.now(), timezone="UTC", name="Eve")
    async with model.provider:  # type: ignore[attr-defined]
        service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, model=model)
        with chat_agent.override(tools=[word_count]):
            fake.script(
                Reply.tool_call("word_count", {"text": "one two three"}, id="toolu_1"), "Three words."
            )
            first = await service.reply(
                Incoming(owner=user.id, text="How many words in 'one two three'?", sent_at=clock.now())
            )
            fake.script(*[ApiError(529, "overloaded_error")] * 3)  # the SDK retries twice
            down = await service.reply(
                Incoming(owner=user.id, text="and now?", sent_at=clock.now() + timedelta(minutes=1))
            )
            third = await service.reply(
                Incoming(owner=user.id, text="are you back?", sent_at=clock.now() + timedelta(minutes=2))
            )

    assert first.text == "Three words."
    assert down.failed and down.text == APOLOGY
    assert third.text == "ok: are you back?"
    bodies = fake.message_bodies()
    assert all(b.get("stream", False) is (max_tokens is None) for b in bodies)
    # The first call has no history; later calls carry the stored exchange, tool call and return
    # paired, and the real API's rules (checked by the fake) accepted every request that got a 200.
    assert _roles(bodies[0]) == ["user"]
    assert _roles(bodies[-1]) == ["user", "assistant", "user", "assistant", "user", "assistant", "user"]
    system = bodies[0]["system"]
    assert "Name to use: Eve" in str(system)
    tool_use = bodies[-1]["messages"][1]["content"]  # type: ignore[index]
    assert any(block["type"] == "tool_use" and block["id"] == "toolu_1" for block in tool_use)
    assert all(r.headers.get("authorization") == "Bearer test-key" for r in fake.requests)
    async with sessions() as session:
        stored = (
            await session.execute(
                select(TranscriptMessage.role, TranscriptMessage.content).order_by(TranscriptMessage.id)
            )
        ).all()
    assert [tuple(row) for row in stored] == [
        ("user", "How many words in 'one two three'?"),
        ("assistant", "Three words."),
        ("user", "and now?"),
        ("assistant", APOLOGY),
        ("user", "are you back?"),
        ("assistant", "ok: are you back?"),
    ]


async def test_a_rejected_history_is_an_apology_not_a_crash(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    settings = _settings(database_url, max_tokens=512)
    model = build_model(settings.model, settings)
    user, _ = await get_or_create_user(sessions, key="cli:bob", now=clock.now(), timezone="UTC")
    async with model.provider:  # type: ignore[attr-defined]
        service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, model=model)
        fake.script(ApiError(400, "invalid_request_error", "messages: roles must alternate"))
        result = await service.reply(Incoming(owner=user.id, text="hello", sent_at=clock.now()))
        after = await service.reply(
            Incoming(owner=user.id, text="hello again", sent_at=clock.now() + timedelta(minutes=1))
        )
    assert result.failed
    assert after.text == "ok: hello again"
