"""The fake Anthropic API's prompt cache, driven through the real `anthropic` SDK and PydanticAI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic import AsyncAnthropic
from pydantic_ai import Agent, CachePoint
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.anthropic import AnthropicModel, AnthropicModelSettings
from pydantic_ai.providers.anthropic import AnthropicProvider

from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.anthropic_cache import min_cache_tokens, rejection

SONNET = "claude-sonnet-5-5"  # caches prefixes from 1024 tokens
HAIKU = "claude-haiku-5-5"  # from 4096
HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}
# About 2,000 tokens by the fake's count: over Sonnet's minimum, under Haiku's.
PERSONA = " ".join(f"Rule {n}: stay warm, brief and honest about what you remember." for n in range(130))


class Clock:
    """Seconds that only move when a test moves them."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(clock: Clock) -> Iterator[FakeAnthropic]:
    """A running fake on the test's clock, with PydanticAI model requests allowed."""
    with FakeAnthropic(clock=clock) as fake, override_allow_model_requests(True):
        yield fake


@pytest.fixture
async def client(fake: FakeAnthropic) -> AsyncIterator[AsyncAnthropic]:
    async with AsyncAnthropic(base_url=fake.base_url, api_key="test-key", max_retries=0) as client:
        yield client


def cached(text: str, ttl: str | None = None) -> dict[str, Any]:
    """A text block that is a cache breakpoint."""
    control = {"type": "ephemeral"} | ({"ttl": ttl} if ttl else {})
    return {"type": "text", "text": text, "cache_control": control}


async def send(client: AsyncAnthropic, *, model: str = SONNET, **request: Any) -> anthropic.types.Usage:
    """One non-streamed request; its usage, after checking it adds up to what count_tokens counts."""
    message = await client.messages.create(model=model, max_tokens=50, **request)
    counted = await client.messages.count_tokens(model=model, **request)
    usage = message.usage
    read, written = usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0
    assert usage.input_tokens + read + written == counted.input_tokens
    return usage


def ask(question: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": question}]


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_first_request_writes_and_the_same_prefix_is_read_next(
    fake: FakeAnthropic, client: AsyncAnthropic, stream: bool
) -> None:
    first = await send(client, system=[cached(PERSONA)], messages=ask("How was your day?"))
    assert first.cache_read_input_tokens == 0 and first.cache_creation_input_tokens > 1024
    assert first.cache_creation is not None and first.cache_creation.ephemeral_5m_input_tokens > 1024
    request: dict[str, Any] = {"system": [cached(PERSONA)], "messages": ask("And tomorrow?")}
    if stream:
        events = await client.messages.create(model=SONNET, max_tokens=50, stream=True, **request)
        start = await anext(aiter(events))
        await events.close()
        assert start.type == "message_start"  # the input side is known when the stream starts
        second = start.message.usage
    else:
        second = await send(client, **request)
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens
    assert second.cache_creation_input_tokens == 0
    counted = await client.messages.count_tokens(model=SONNET, **request)
    assert second.input_tokens == counted.input_tokens - second.cache_read_input_tokens > 0  # the question
    assert [use.read for use in fake.cache.uses] == [0, first.cache_creation_input_tokens]


async def test_a_changed_byte_in_the_system_invalidates_what_follows(client: AsyncAnthropic) -> None:
    tools = [{"name": "recall", "description": PERSONA, "input_schema": {"type": "object"}}]
    tools[0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    request: dict[str, Any] = {"tools": tools, "messages": ask("hi")}
    first = await send(client, system=[cached(PERSONA + " Be kind.")], **request)
    changed = await send(client, system=[cached(PERSONA + " Be kinb.")], **request)
    assert first.cache_creation is not None and changed.cache_creation is not None
    tools_prefix = first.cache_creation.ephemeral_1h_input_tokens
    assert tools_prefix > 1024 and first.cache_creation.ephemeral_5m_input_tokens > 1024
    # The tools before the change are still read; the system from the changed byte on is written again.
    assert changed.cache_read_input_tokens == tools_prefix
    assert changed.cache_creation_input_tokens == first.cache_creation.ephemeral_5m_input_tokens


async def test_lifetimes_run_from_the_last_read_on_the_clock(clock: Clock, client: AsyncAnthropic) -> None:
    messages = [{"role": "user", "content": [cached(PERSONA)]}, {"role": "assistant", "content": "Noted."}]
    request: dict[str, Any] = {"system": [cached(PERSONA, "1h")], "messages": [*messages, *ask("so?")]}
    written = await send(client, **request)
    assert written.cache_creation is not None
    persona, memory = (
        written.cache_creation.ephemeral_1h_input_tokens,
        written.cache_creation.ephemeral_5m_input_tokens,
    )
    assert persona > 0 and memory > 0 and written.cache_read_input_tokens == 0
    for _ in range(3):  # each read four minutes after the last keeps the 5-minute entry alive
        clock.now += 240
        assert (await send(client, **request)).cache_read_input_tokens == persona + memory
    clock.now += 301  # the 5-minute entry lapses; the 1-hour one is read and written behind it again
    lapsed = await send(client, **request)
    assert (lapsed.cache_read_input_tokens, lapsed.cache_creation_input_tokens) == (persona, memory)
    clock.now += 3601  # an hour without a request: nothing is left
    cold = await send(client, **request)
    assert (cold.cache_read_input_tokens, cold.cache_creation_input_tokens) == (0, persona + memory)


@pytest.mark.parametrize(("model", "caches"), [(SONNET, True), (HAIKU, False)])
async def test_prefixes_under_the_models_minimum_are_not_cached(
    client: AsyncAnthropic, model: str, caches: bool
) -> None:
    request: dict[str, Any] = {"system": [cached(PERSONA)], "messages": ask("hi")}
    first = await send(client, model=model, **request)
    second = await send(client, model=model, **request)
    assert (first.input_tokens + first.cache_creation_input_tokens >= min_cache_tokens(model)) is caches
    assert (first.cache_creation_input_tokens > 0) is caches
    assert second.cache_read_input_tokens == first.cache_creation_input_tokens


@pytest.mark.parametrize(
    ("model", "minimum"),
    [
        ("claude-haiku-4-5", 4096),
        ("claude-3-5-haiku-20241022", 2048),
        ("claude-opus-4-5-20251101", 4096),
        ("claude-opus-4-20250514", 1024),
        ("claude-opus-4-1", 1024),
        ("claude-sonnet-4-5", 1024),
        ("claude-opus-5-5", 4096),
        ("some-gateway-model", 1024),
    ],
)
def test_minimum_cacheable_length_per_model(model: str, minimum: int) -> None:
    assert min_cache_tokens(model) == minimum


@pytest.mark.parametrize(("blocks_after", "hit"), [(19, True), (20, False)])
async def test_the_lookback_reaches_20_positions_back(
    client: AsyncAnthropic, blocks_after: int, hit: bool
) -> None:
    written = await send(client, system=[cached(PERSONA)], messages=ask("first"))
    # The same system, now without its breakpoint: only the lookback from the last block can find it.
    turns = [{"type": "text", "text": f"line {n}"} for n in range(blocks_after - 1)]
    messages = [{"role": "user", "content": [*turns, cached("last line")]}]
    later = await send(client, system=[{"type": "text", "text": PERSONA}], messages=messages)
    system_prefix = written.cache_creation_input_tokens
    assert later.cache_read_input_tokens == (system_prefix if hit else 0)


async def test_pydantic_ai_usage_counts_reads_and_one_hour_writes(fake: FakeAnthropic) -> None:
    provider = AnthropicProvider(base_url=fake.base_url, api_key="test-key")
    settings = AnthropicModelSettings(
        anthropic_cache_tool_definitions="1h", anthropic_cache_instructions="1h", anthropic_cache=True
    )
    async with provider:
        agent = Agent(
            AnthropicModel(SONNET, provider=provider), instructions=PERSONA, model_settings=settings
        )

        @agent.tool_plain
        def recall(topic: str) -> str:
            """Recall what the user said about a topic."""
            return topic

        first = await agent.run("Good morning!")
        second = await agent.run("What did I just say?", message_history=first.all_messages())
    one, two = fake.cache.uses
    assert [(b.path, b.ttl, b.automatic) for b in one.breakpoints] == [
        ("tools.0", "1h", False),
        ("system.0", "1h", False),
        ("messages.0.content.0", "5m", True),
    ]
    # The tools alone are too short to cache: they are written with the instructions, for an hour.
    usage = first.usage
    assert usage.cache_write_1h_tokens == one.breakpoints[1].tokens == one.written_1h
    assert usage.cache_write_tokens == one.total and usage.cache_read_tokens == 0
    assert usage.input_tokens == one.total  # PydanticAI's input tokens include cache reads and writes
    usage = second.usage
    assert usage.cache_read_tokens == one.total  # all of the first request: the conversation breakpoint moved
    assert usage.cache_write_tokens == two.total - one.total and usage.cache_write_1h_tokens == 0
    assert usage.input_tokens == two.total and two.uncached == 0


async def test_a_fifth_breakpoint_is_refused_with_400(fake: FakeAnthropic) -> None:
    # PydanticAI keeps its own breakpoints within four; a gateway's top-level one (extra_body) makes five.
    settings = AnthropicModelSettings(
        anthropic_cache_tool_definitions=True,
        anthropic_cache_instructions=True,
        extra_body={"cache_control": {"type": "ephemeral"}},
    )
    provider = AnthropicProvider(base_url=fake.base_url, api_key="test-key")
    async with provider:
        agent = Agent(
            AnthropicModel(SONNET, provider=provider), instructions=PERSONA, model_settings=settings
        )

        @agent.tool_plain
        def recall(topic: str) -> str:
            """Recall what the user said about a topic."""
            return topic

        with pytest.raises(ModelHTTPError) as raised:
            await agent.run(["profile", CachePoint(), "today", CachePoint(), "What now?"])
    assert raised.value.status_code == 400
    assert "A maximum of 4 blocks with cache_control may be provided. Found 5." in str(raised.value.body)
    assert fake.cache.uses == []  # a refused request neither reads nor writes


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        (
            {"system": [cached("a", "5m")], "messages": [{"role": "user", "content": [cached("b", "1h")]}]},
            "messages.0.content.0.cache_control.ttl: a ttl='1h' cache_control block must not come after",
        ),
        (
            {
                "system": [cached("a")],
                "messages": ask("b"),
                "cache_control": {"type": "ephemeral", "ttl": "1h"},
            },
            "cache_control.ttl: a ttl='1h' cache_control block must not come after a ttl='5m'",
        ),
        (
            {"system": [cached("a", "2h")], "messages": ask("b")},
            "system.0.cache_control.ttl: Input should be",
        ),
        (
            {
                "system": [cached(str(n)) for n in range(4)],
                "messages": [{"role": "user", "content": [cached("x")]}],
            },
            "A maximum of 4 blocks with cache_control may be provided. Found 5.",
        ),
    ],
)
async def test_breakpoints_the_real_api_refuses(
    fake: FakeAnthropic, client: AsyncAnthropic, request_body: dict[str, Any], message: str
) -> None:
    body = {"model": SONNET, "max_tokens": 5} | request_body
    assert message in (rejection(body) or "")
    async with httpx.AsyncClient() as http:
        raw = await http.post(f"{fake.base_url}/v1/messages", json=body, headers=HEADERS)
    assert raw.status_code == 400
    assert raw.json()["error"] == {"type": "invalid_request_error", "message": rejection(body)}
    with pytest.raises(anthropic.BadRequestError, match="cache_control"):
        await client.messages.create(**body)


async def test_automatic_breakpoint_on_an_explicit_one_counts_once(client: AsyncAnthropic) -> None:
    system = [cached(str(n)) for n in range(3)]
    messages = [{"role": "user", "content": [cached(PERSONA)]}]
    usage = await send(client, system=system, messages=messages, cache_control={"type": "ephemeral"})
    assert usage.cache_creation_input_tokens > 1024 and usage.input_tokens == 0


async def test_concurrent_identical_requests_write_once_and_read_after(
    fake: FakeAnthropic, client: AsyncAnthropic
) -> None:
    # An entry is readable once the request writing it is answered: the later ones read it.
    request: dict[str, Any] = {"system": [cached(PERSONA)], "messages": ask("hello")}
    usages = await asyncio.gather(*(send(client, **request) for _ in range(6)))
    writes = [usage.cache_creation_input_tokens for usage in usages if usage.cache_creation_input_tokens]
    assert len(writes) == 1
    assert sorted(use.read for use in fake.cache.uses) == [0, *[writes[0]] * 5]
    assert {use.total for use in fake.cache.uses} == {writes[0] + usages[0].input_tokens}
