"""The chat request in cache order, through the real Anthropic SDK against the local Messages API.

What is checked is what the provider's cache reads: the bytes of each request up to its breakpoints,
a private chat's and a group's.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
from pydantic_ai.models import override_allow_model_requests
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.chat.agent import chat_agent
from agent.core.caching import minimum_prefix
from agent.core.models import build_model
from agent.core.settings import Settings
from agent.touchpoints.compose import Occasion, compose
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, Speaker
from bench.clock import FrozenClock
from bench.fakes.anthropic_api import FakeAnthropic, Reply, fake_anthropic_server
from db.models import DaySegment, ModelUsage

pytestmark = pytest.mark.both_databases

MODEL = "anthropic:claude-haiku-4-5"
Json = dict[str, Any]


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    yield from fake_anthropic_server()


@pytest.fixture
def timed(clock: FrozenClock, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeAnthropic]:
    """The fake API whose cache lives on the turns' clock, where the Anthropic SDK sends requests."""
    with FakeAnthropic(clock=lambda: clock.now().timestamp()) as fake, override_allow_model_requests(True):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        yield fake


def _settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"model": MODEL, "anthropic_api_key": "test-key"} | overrides
    return Settings(database_url=database_url, _env_file=None, **values)


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
    """The conversation's package block of the system prompt."""
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


async def test_turns_of_a_conversation_repeat_the_previous_request_and_carry_their_notes(
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
        await service.reply(Incoming(owner=user.id, text="hello there", sent_at=start))
        fake.script(Reply.tool_call("word_count", {"text": "a b c"}, id="toolu_1"), "Three.")
        await service.reply(
            Incoming(owner=user.id, text="how many words in 'a b c'?", sent_at=start + timedelta(minutes=1))
        )
        await service.reply(Incoming(owner=user.id, text="thanks", sent_at=start + timedelta(minutes=3)))
        # A source of the conversation's package changes between turns: an in-day summary is written.
        async with sessions() as session, session.begin():
            segment = (
                await session.execute(select(DaySegment).where(DaySegment.user_id == user.id))
            ).scalar_one()
            segment.summary = "## Summary\nAda said hello and counted words."
            segment.summary_updated_at = start + timedelta(minutes=4)
        await service.reply(
            Incoming(owner=user.id, text="what did we do today?", sent_at=start + timedelta(minutes=5))
        )
        await service.reply(Incoming(owner=user.id, text="and then?", sent_at=start + timedelta(minutes=6)))
        await service.settle()
    bodies = fake.message_bodies()
    assert len(bodies) == 6  # the tool turn makes two requests

    for body in bodies:
        points = breakpoints(body)
        assert len(points) <= 4, points
        # The persona, then the conversation's package, then the conversation (automatic).
        assert points[-1] == "auto" and sum(p.startswith("system[") for p in points) == 2
    # Every request starts with the bytes of the one before, up to its last breakpoint: the tool's
    # second request, and where the conversation's package changed (below) too.
    kept = [prefix_kept(earlier, later) for earlier, later in itertools.pairwise(bodies)]
    assert kept == [True] * 5
    # The conversation's package keeps its first text in the instructions on every request.
    assert len({memory_text(b) for b in bodies}) == 1
    # This turn's note comes after the history, first in the user prompt, and stays with its turn.
    first_turn = bodies[-1]["messages"][0]
    note, said = user_texts(first_turn)[:2]
    assert note.startswith("<this_turn>") and "first message" in note and said == "hello there"
    last = user_texts(bodies[-1]["messages"][-1])
    assert last[0].startswith("<this_turn>") and last[1] == "and then?"
    # The summary written mid-conversation reaches the model once, as a replacement in the turn it came
    # before (PydanticAI frames it as a system entry, explained from the first request on), and the
    # request after it repeats it.
    changed = [b for b in bodies if any("counted words" in t for m in b["messages"] for t in user_texts(m))]
    assert changed == bodies[-2:]
    assert "counted words" not in memory_text(bodies[-1])
    # It comes before that turn's note and words: what the person said is the last thing read.
    turn = next(m for m in bodies[-2]["messages"][::-1] if any("counted words" in t for t in user_texts(m)))
    texts = user_texts(turn)
    change = next(i for i, t in enumerate(texts) if "counted words" in t)
    assert texts[change + 1].startswith("<this_turn>") and texts[-1] == "what did we do today?"


async def test_a_new_conversation_rebuilds_its_memory(
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
    await service.reply(Incoming(owner=user.id, text="my sister Maya visits on Friday", sent_at=start))
    await service.reply(Incoming(owner=user.id, text="ok", sent_at=start + timedelta(minutes=1)))
    # 17 minutes of quiet: a new conversation, whose memory holds what was said earlier today.
    await service.reply(Incoming(owner=user.id, text="back again", sent_at=start + timedelta(minutes=18)))
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
    await service.reply(Incoming(owner=user.id, text="hi", sent_at=clock.now()))
    await service.reply(Incoming(owner=user.id, text="hi again", sent_at=clock.now() + timedelta(minutes=1)))
    await service.settle()
    bodies = fake.message_bodies()
    assert len(bodies) == 2
    assert all("cache_control" not in json.dumps(body) for body in bodies)


async def test_from_the_second_turn_most_of_the_input_is_read_from_the_cache(
    timed: FakeAnthropic,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    # The default chat model's family (Sonnet caches from 1,024 tokens); the fake's cache follows
    # the turns' clock.
    settings = _settings(database_url, model="anthropic:claude-sonnet-5-5")
    service = await _service(settings, engine, sessions, clock)
    user, _ = await get_or_create_user(sessions, key="cli:di", now=clock.now(), timezone="UTC", name="Di")
    for n in range(4):
        await service.reply(
            Incoming(owner=user.id, text=f"message {n}", sent_at=clock.now() + timedelta(minutes=n))
        )
    await service.settle()
    async with sessions() as session:
        usage = (await session.execute(select(ModelUsage).where(ModelUsage.kind == "chat"))).scalar_one()
    uses = timed.cache.uses
    assert uses[0].read == 0 and uses[0].written_1h > 0  # the persona and the conversation's package, 1 h
    for earlier, later in itertools.pairwise(uses):
        # Each request reads everything the one before sent, and writes only the new turn.
        assert later.read == earlier.total and later.uncached == 0
    assert sum(u.read for u in uses[1:]) / sum(u.total for u in uses[1:]) > 0.8
    # What the API reported is what is metered and stored.
    assert usage.cache_read_tokens == sum(u.read for u in uses)
    assert usage.cache_write_tokens == sum(u.written for u in uses)
    assert usage.input_tokens == sum(u.total for u in uses)


async def test_a_compaction_keeps_the_cached_tools_and_instructions(
    timed: FakeAnthropic,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    # A short history budget: the conversation's older turns become a summary after a few turns.
    settings = _settings(database_url, model="anthropic:claude-sonnet-5-5", history_token_budget=500)
    service = await _service(settings, engine, sessions, clock)
    user, _ = await get_or_create_user(sessions, key="cli:ed", now=clock.now(), timezone="UTC", name="Ed")
    for n in range(8):
        said = f"message {n}: " + "the allotment's water tank is leaking again by the fence " * 4
        await service.reply(Incoming(owner=user.id, text=said, sent_at=clock.now() + timedelta(minutes=n)))
    await service.settle()
    chat = [
        (body, use)
        for body, use in zip(timed.message_bodies(), timed.cache.uses, strict=True)
        if use.model == "claude-sonnet-5-5"
    ]
    summarised = ["<pyai:conversation_summary>" in json.dumps(body["messages"][0]) for body, _ in chat]
    assert any(summarised) and not summarised[0]
    # Tools and system, byte for byte, are the first request's before and after the compaction.
    cached = {json.dumps([_plain(body.get("tools")), _plain(body["system"])]) for body, _ in chat}
    assert len(cached) == 1
    # So the turn that brings the first summary still reads the persona and the memory from the cache.
    _, use = chat[summarised.index(True)]
    instructions = [b for b in use.breakpoints if not b.automatic][-1]
    assert instructions.path.startswith("system.") and use.read >= instructions.tokens > 0


@pytest.mark.parametrize("prompt_cache", ["1h", "5m"])
async def test_a_group_turn_reads_the_turn_before_it_nine_minutes_later(
    prompt_cache: Literal["1h", "5m"],
    timed: FakeAnthropic,
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    # A busy group's addressed turns come further apart than a 5-minute entry lives.
    settings = _settings(database_url, model="anthropic:claude-sonnet-5-5", prompt_cache=prompt_cache)
    service = await _service(settings, engine, sessions, clock)
    group, _ = await group_owner(sessions, chat_id=-7, title="Allotment", now=clock.now(), timezone="UTC")
    ana, bob = Speaker(11, "Ana"), Speaker(12, "Bob")
    for n in range(3):
        clock.advance(timedelta(minutes=8))
        await service.hear(
            Incoming(owner=group.id, text=f"the tank leaks again ({n})", sent_at=clock.now(), speaker=ana)
        )
        clock.advance(timedelta(minutes=1))
        await service.group_reply(
            Incoming(
                owner=group.id,
                text=f"Nikita, any idea? ({n})",
                sent_at=clock.now(),
                speaker=bob,
                may_change_memory=False,
            )
        )
    # A person's private chat, for comparison: its turns come minutes apart.
    person, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    await service.reply(Incoming(owner=person.id, text="hello", sent_at=clock.now()))
    await service.settle()
    *group_uses, private = timed.cache.uses
    assert len(group_uses) == 3
    for use in group_uses:
        # The persona, the group's memory and the conversation (automatic), all for an hour: a
        # 1-hour entry after a 5-minute one is a 400, so the instructions follow the conversation.
        assert [(b.path.split(".")[0], b.ttl, b.automatic) for b in use.breakpoints] == [
            ("system", "1h", False),
            ("system", "1h", False),
            ("messages", "1h", True),
        ]
    for earlier, later in itertools.pairwise(group_uses):
        # Nine minutes on, the whole request before is read; only the new exchange is written.
        assert later.read == earlier.total and later.uncached == 0 and later.written_5m == 0
    assert [(b.ttl, b.automatic) for b in private.breakpoints][-1] == ("5m", True)
    assert {b.ttl for b in private.breakpoints if not b.automatic} == {prompt_cache}


async def test_the_persona_of_a_one_off_call_is_shared_between_users_when_long_enough(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    persona = tmp_path / "persona.md"
    persona.write_text(
        "# Who you are\n" + "You are {persona_name}, kind and curious. " * 400, encoding="utf-8"
    )
    settings = Settings(
        model="anthropic:claude-sonnet-5-5",
        anthropic_api_key="test-key",  # type: ignore[arg-type]
        persona_file=str(persona),
        _env_file=None,
    )
    with FakeAnthropic() as fake, override_allow_model_requests(True):
        monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
        model = build_model(settings.model, settings)
        fake.script(*[Reply.tool_call("final_result", {"send": True, "text": "Hi!"})] * 2)
        for who in ("Ana", "Bo"):
            occasion = Occasion(
                reason=f"{who}'s concert", local_now="Friday 18:00", context=f"<about>{who}</about>"
            )
            await compose(model, settings, occasion)
    first, _ = fake.message_bodies()
    assert breakpoints(first) == ["system[0]"]  # after the persona, before the user's own part
    assert "Ana" not in first["system"][0]["text"] and "Ana" in first["system"][1]["text"]
    assert fake.cache.uses[1].read == fake.cache.uses[0].written > 0


def test_the_minimum_prefix_follows_the_model_family() -> None:
    assert minimum_prefix("anthropic:claude-sonnet-5-5") == 1024
    assert minimum_prefix("anthropic:claude-haiku-4-5") == 4096
    assert minimum_prefix("anthropic:claude-opus-4-1") == 1024
    assert minimum_prefix("openai:gpt-5.6") == 1024
