"""The chat request in cache order, through the real Anthropic SDK against the local Messages API.

What is checked is what the provider's cache reads: the bytes of each request up to its breakpoints.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.chat.agent import build_model, chat_agent
from agent.core.clock import FrozenClock
from agent.core.settings import Settings
from agent.turn.service import TurnService
from bench.fakes.anthropic_api import FakeAnthropic, Reply, fake_anthropic_server
from db.models import DaySegment

pytestmark = pytest.mark.both_databases

MODEL = "anthropic:claude-haiku-4-5"
Json = dict[str, Any]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    yield from fake_anthropic_server()


def _settings(database_url: str, **overrides: Any) -> Settings:
    return Settings(
        database_url=database_url,
        model=MODEL,
        anthropic_api_key="test-key",  # type: ignore[arg-type]
        _env_file=None,
        **overrides,
    )


def breakpoints(body: Json) -> list[str]:
    """Where a request asks the cache to write: `tools[i]`, `system[i]`, `messages[i][j]`, `auto`."""
    found = [f"tools[{i}]" for i, tool in enumerate(body.get("tools") or []) if "cache_control" in tool]
    system = body.get("system")
    if isinstance(system, list):
        found += [f"system[{i}]" for i, block in enumerate(system) if "cache_control" in block]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        if isinstance(content, list):
            found += [f"messages[{i}][{j}]" for j, block in enumerate(content) if "cache_control" in block]
    if "cache_control" in body:
        found.append("auto")
    return found


def _plain(value: Any) -> Any:
    """A request part without its cache marks (they are not part of what is cached)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def prefix_kept(earlier: Json, later: Json) -> bool:
    """Whether `later` repeats `earlier` byte for byte up to the end of its messages (the automatic
    breakpoint's place): tools, system and every earlier message."""
    same = [_plain(earlier.get(k)) == _plain(later.get(k)) for k in ("tools", "system")]
    n = len(earlier["messages"])
    head = json.dumps(_plain(earlier["messages"]), sort_keys=True)
    return all(same) and json.dumps(_plain(later["messages"][:n]), sort_keys=True) == head


def memory_text(body: Json) -> str:
    """The session's memory block of the system prompt."""
    system = body["system"]
    assert isinstance(system, list)
    return next(b["text"] for b in system if 'id="agent:memory"' in b["text"])


def user_texts(message: Json) -> list[str]:
    return [b["text"] for b in message["content"] if b.get("type") == "text"]


async def _service(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> TurnService:
    return TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=build_model(settings.model, settings),
    )


async def test_turns_of_a_session_repeat_the_previous_request_and_carry_their_notes(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    settings = _settings(database_url)
    service = await _service(settings, engine, sessions, clock)
    user, _ = await get_or_create_user(sessions, key="cli:ada", now=clock.now(), timezone="UTC", name="Ada")

    def word_count(text: str) -> int:
        """Count the words in a text."""
        return len(text.split())

    start = clock.now()
    with chat_agent.override(tools=[word_count]):
        await service.reply(user.id, "hello there", start)
        fake.script(Reply.tool_call("word_count", {"text": "a b c"}, id="toolu_1"), "Three.")
        await service.reply(user.id, "how many words in 'a b c'?", start + timedelta(minutes=1))
        await service.reply(user.id, "thanks", start + timedelta(minutes=3))
        # A source of the session's memory changes between turns: an in-day summary is written.
        async with sessions() as session, session.begin():
            segment = (
                await session.execute(select(DaySegment).where(DaySegment.user_id == user.id))
            ).scalar_one()
            segment.summary = "## Summary\nAda said hello and counted words."
            segment.summary_updated_at = start + timedelta(minutes=4)
        await service.reply(user.id, "what did we do today?", start + timedelta(minutes=5))
        await service.reply(user.id, "and then?", start + timedelta(minutes=6))
        await service.settle()
    bodies = fake.message_bodies()
    assert len(bodies) == 6  # the tool turn makes two requests

    for body in bodies:
        points = breakpoints(body)
        assert len(points) <= 4, points
        # The persona, then the session's memory, then the conversation (automatic).
        assert points[-1] == "auto" and sum(p.startswith("system[") for p in points) == 2
    # Every request starts with the bytes of the one before, up to its last breakpoint (the tool's
    # second request too), except once: where the session's memory changed (below).
    kept = [prefix_kept(earlier, later) for earlier, later in itertools.pairwise(bodies)]
    assert kept == [True, True, True, False, True]
    # The session's memory keeps its first text in the instructions on every request.
    assert len({memory_text(b) for b in bodies}) == 1
    # This turn's note comes after the history, first in the user prompt, and stays with its turn.
    first_turn = bodies[-1]["messages"][0]
    note, said = user_texts(first_turn)[:2]
    assert note.startswith("<this_turn>") and "first message" in note and said == "hello there"
    last = user_texts(bodies[-1]["messages"][-1])
    assert last[0].startswith("<this_turn>") and last[1] == "and then?"
    # The summary written mid-session reaches the model once, as a replacement in the turn it came
    # before (PydanticAI frames it as a system entry: one rewrite), and the request after it
    # repeats it.
    changed = [b for b in bodies if any("counted words" in t for m in b["messages"] for t in user_texts(m))]
    assert changed == bodies[-2:]
    assert "counted words" not in memory_text(bodies[-1])


async def test_a_new_session_rebuilds_its_memory(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    service = await _service(_settings(database_url), engine, sessions, clock)
    user, _ = await get_or_create_user(sessions, key="cli:bo", now=clock.now(), timezone="UTC", name="Bo")
    start = clock.now()
    await service.reply(user.id, "my sister Maya visits on Friday", start)
    await service.reply(user.id, "ok", start + timedelta(minutes=1))
    # 17 minutes of quiet: a new session, whose memory holds what was said earlier today.
    await service.reply(user.id, "back again", start + timedelta(minutes=18))
    await service.settle()
    first, second, third = fake.message_bodies()
    assert memory_text(first) == memory_text(second)
    assert "Maya" not in memory_text(second) and "Maya" in memory_text(third)
    assert len(third["messages"]) == 1


async def test_prompt_cache_off_sends_no_cache_control(
    fake: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    service = await _service(_settings(database_url, prompt_cache="off"), engine, sessions, clock)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    await service.reply(user.id, "hi", clock.now())
    await service.reply(user.id, "hi again", clock.now() + timedelta(minutes=1))
    await service.settle()
    bodies = fake.message_bodies()
    assert len(bodies) == 2
    assert all("cache_control" not in json.dumps(body) for body in bodies)
