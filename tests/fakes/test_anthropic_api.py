"""The fake Anthropic API, driven through PydanticAI and the real `anthropic` SDK, and over raw HTTP."""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anthropic
import httpx
import pytest
from anthropic import AsyncAnthropic
from pydantic_ai import Agent
from pydantic_ai.exceptions import ModelAPIError, ModelHTTPError, ModelOverloadedError
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from pydantic_ai.usage import UsageLimits

from bench.fakes.anthropic_api import (
    ApiError,
    FakeAnthropic,
    Reply,
    fake_anthropic_server,
    last_user_text,
    rejection,
)

# Not a deprecated model: the SDK warns on those, and warnings are errors here.
MODEL_NAME = "claude-haiku-4-5"
HEADERS = {"x-api-key": "test-key", "anthropic-version": "2023-06-01"}


@pytest.fixture
def fake() -> Iterator[FakeAnthropic]:
    """A running fake, with PydanticAI model requests allowed."""
    yield from fake_anthropic_server()


@pytest.fixture
async def model(fake: FakeAnthropic) -> AsyncIterator[AnthropicModel]:
    """An Anthropic model pointed at the fake; its HTTP client is closed afterwards."""
    provider = AnthropicProvider(base_url=fake.base_url, api_key="test-key")
    async with provider:
        yield AnthropicModel(MODEL_NAME, provider=provider)


def adder(model: AnthropicModel) -> tuple[Agent[None, str], list[tuple[int, int]]]:
    """An agent with one `add` tool, and the calls the tool received."""
    calls: list[tuple[int, int]] = []
    agent = Agent(model)

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        calls.append((a, b))
        return a + b

    return agent, calls


def test_starts_and_stops_quickly_without_leaking_a_thread() -> None:
    before = set(threading.enumerate())  # other tests' threads may end meanwhile: count only new ones
    started = time.monotonic()
    with FakeAnthropic() as fake:
        startup = time.monotonic() - started
        assert fake.base_url.startswith("http://127.0.0.1:")
        serving = set(threading.enumerate()) - before
        stopping = time.monotonic()
    assert startup < 1 and time.monotonic() - stopping < 1
    assert serving  # the server ran in a thread of its own...
    assert [t for t in serving if t.is_alive()] == []  # ...which is gone


async def test_plain_text_non_streaming(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script("Hello there")
    result = await Agent(model).run("hi", model_settings={"max_tokens": 256})
    assert result.output == "Hello there"
    (request,) = fake.requests
    assert request.body["max_tokens"] == 256 and not request.body.get("stream")
    # anthropic 2.x sends the API key as a bearer token.
    assert request.headers["authorization"] == "Bearer test-key"
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


async def test_default_run_streams_behind_the_scenes(fake: FakeAnthropic, model: AnthropicModel) -> None:
    # PydanticAI sends the model's maximum output as max_tokens, which the SDK only allows streamed.
    fake.script("A streamed answer, word by word.")
    result = await Agent(model).run("hi")
    assert result.output == "A streamed answer, word by word."
    assert fake.message_bodies()[0]["stream"] is True


async def test_run_stream_yields_text_deltas(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script("one two three four")
    async with Agent(model).run_stream("count") as run:
        chunks = [chunk async for chunk in run.stream_text(delta=True, debounce_by=None)]
    assert "".join(chunks) == "one two three four"
    assert len(chunks) == 4
    assert fake.message_bodies()[0]["stream"] is True


@pytest.mark.parametrize("max_tokens", [None, 300], ids=["streamed", "json"])
async def test_tool_call_round_trip(
    fake: FakeAnthropic, model: AnthropicModel, max_tokens: int | None
) -> None:
    agent, calls = adder(model)
    fake.script(Reply.tool_call("add", {"a": 2, "b": 40}, id="toolu_add_1"), "The sum is 42.")
    settings: Any = {"max_tokens": max_tokens} if max_tokens else None
    result = await agent.run("what is 2 + 40?", model_settings=settings)
    assert result.output == "The sum is 42." and calls == [(2, 40)]
    first, second = fake.message_bodies()
    assert [tool["name"] for tool in first["tools"]] == ["add"]
    assert second["messages"][-1]["content"][0]["tool_use_id"] == "toolu_add_1"
    assert second["messages"][-1]["content"][0]["type"] == "tool_result"


async def test_second_run_with_message_history_is_accepted(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    agent, _ = adder(model)
    fake.script(Reply.tool_call("add", {"a": 1, "b": 1}), "Two.")
    first = await agent.run("1 + 1?")
    second = await agent.run("and again?", message_history=first.all_messages())
    assert second.output == "ok: and again?"
    roles = [message["role"] for message in fake.message_bodies()[-1]["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]


def call(tool_call_id: str) -> ModelResponse:
    """A response calling `add`."""
    return ModelResponse(
        parts=[ToolCallPart(tool_name="add", args={"a": 1, "b": 2}, tool_call_id=tool_call_id)]
    )


def returned(tool_call_id: str) -> ModelRequest:
    """The request carrying `add`'s return."""
    return ModelRequest(parts=[ToolReturnPart(tool_name="add", content="3", tool_call_id=tool_call_id)])


def said(text: str) -> ModelResponse:
    """A text response."""
    return ModelResponse(parts=[TextPart(text)])


def asked(text: str) -> ModelRequest:
    """A user prompt."""
    return ModelRequest(parts=[UserPromptPart(text)])


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ([said("I speak first")], 'first message must use the "user" role'),
        # PydanticAI drops an empty prompt, so the history starts with the model's turn.
        ([asked(""), said("x")], 'first message must use the "user" role'),
        # A return separated from its call, as a careless history trim would leave it.
        (
            [asked("hi"), call("t1"), asked("other"), said("y"), returned("t1"), said("z")],
            "without `tool_result`",
        ),
        (
            [asked("hi"), call("t1"), returned("t1"), call("t1"), returned("t1"), said("x")],
            "ids must be unique",
        ),
    ],
    ids=["starts-with-response", "empty-first-prompt", "return-after-another-turn", "duplicate-tool-ids"],
)
async def test_history_the_real_api_rejects_raises_model_http_error(
    fake: FakeAnthropic, model: AnthropicModel, history: list[ModelMessage], message: str
) -> None:
    with pytest.raises(ModelHTTPError) as caught:
        await Agent(model).run("next", message_history=history, model_settings={"max_tokens": 100})
    assert caught.value.status_code == 400
    assert isinstance(caught.value.body, dict)
    assert caught.value.body["error"]["type"] == "invalid_request_error"
    assert message in caught.value.body["error"]["message"]


@pytest.mark.parametrize(
    ("history", "answered"),
    [
        ([asked("hi"), said("hello"), returned("toolu_orphan"), said("three")], []),
        ([asked("hi"), call("toolu_open"), asked("never mind"), said("ok")], ["toolu_open"]),
    ],
    ids=["orphan-tool-return", "unanswered-tool-call"],
)
async def test_pydantic_ai_repairs_some_histories_before_sending(
    fake: FakeAnthropic, model: AnthropicModel, history: list[ModelMessage], answered: list[str]
) -> None:
    # Pinned because history trimming relies on it: PydanticAI 2.68 drops an orphan return and answers an
    # open call with a synthetic result, so the API accepts both (the fake would have rejected the raw form).
    result = await Agent(model).run("next", message_history=history, model_settings={"max_tokens": 100})
    assert result.output == "ok: next"
    sent = fake.message_bodies()[0]["messages"]
    results = [block for message in sent for block in message["content"] if block["type"] == "tool_result"]
    assert [block["tool_use_id"] for block in results] == answered


async def test_overloaded_error_is_catchable_without_retries(
    fake: FakeAnthropic, model: AnthropicModel
) -> None:
    fake.script(ApiError(529, "overloaded_error", "Overloaded"))
    with pytest.raises(ModelOverloadedError) as caught:
        await Agent(model).run("hi", model_settings={"max_retries": 0})
    assert isinstance(caught.value, ModelHTTPError) and caught.value.status_code == 529
    assert len(fake.requests) == 1


async def test_sdk_retries_server_errors_as_told(fake: FakeAnthropic, model: AnthropicModel) -> None:
    # Each error reply tells the client to retry after 1 ms (`retry-after-ms`, which the SDK follows
    # up to a minute), so SDK retries against the fake never wait out the SDK's own backoff.
    fake.script(ApiError(529, "overloaded_error"))
    async with httpx.AsyncClient(base_url=fake.base_url, headers=HEADERS) as client:
        told = await client.post("/v1/messages", json=body_of(user("hi")))
    assert told.status_code == 529 and told.headers["retry-after-ms"] == "1"
    fake.requests.clear()
    fake.script(ApiError(529, "overloaded_error"), ApiError(500, "api_error"), "finally")
    result = await Agent(model).run("hi")
    assert result.output == "finally"
    assert [r.headers.get("x-stainless-retry-count") for r in fake.requests] == ["0", "1", "2"]


async def test_error_event_inside_a_stream(fake: FakeAnthropic, model: AnthropicModel) -> None:
    fake.script(ApiError(529, "overloaded_error", "Overloaded", in_stream=True))
    with pytest.raises(ModelOverloadedError) as caught:
        await Agent(model).run("hi", model_settings={"max_retries": 0})
    assert caught.value.in_stream


async def test_responder_answers_from_the_system_prompt(fake: FakeAnthropic, model: AnthropicModel) -> None:
    def by_system(body: dict[str, Any]) -> str:
        system = body.get("system") or []
        text = system if isinstance(system, str) else " ".join(block["text"] for block in system)
        return f"{text.upper()} / {last_user_text(body)}"

    fake.responder = by_system
    result = await Agent(model, instructions="be loud").run("hello")
    assert result.output == "BE LOUD / hello"
    assert fake.pending == 0


async def test_count_tokens_before_request(fake: FakeAnthropic, model: AnthropicModel) -> None:
    limits = UsageLimits(input_tokens_limit=100_000, count_tokens_before_request=True)
    result = await Agent(model).run("hi", usage_limits=limits)
    assert result.output == "ok: hi"
    assert [request.path for request in fake.requests] == ["/v1/messages/count_tokens", "/v1/messages"]


async def test_wrong_api_key_is_rejected_with_401(fake: FakeAnthropic) -> None:
    fake.api_key = "the-right-key"
    async with AsyncAnthropic(base_url=fake.base_url, api_key="wrong", max_retries=0) as client:
        model = AnthropicModel(MODEL_NAME, provider=AnthropicProvider(anthropic_client=client))
        with pytest.raises(ModelHTTPError) as caught:
            await Agent(model).run("hi")
    assert caught.value.status_code == 401
    assert isinstance(caught.value, ModelAPIError)


def test_missing_api_key_gets_anthropics_error_shape(fake: FakeAnthropic) -> None:
    body = body_of(user("hi"))
    response = httpx.post(
        f"{fake.base_url}/v1/messages", json=body, headers={"anthropic-version": "2023-06-01"}
    )
    assert response.status_code == 401
    assert response.json()["type"] == "error"
    assert response.json()["error"]["type"] == "authentication_error"


async def test_anthropic_base_url_env_var_is_honoured(
    fake: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake.base_url)
    provider = AnthropicProvider(api_key="test-key")
    async with provider:
        result = await Agent(AnthropicModel(MODEL_NAME, provider=provider)).run("via env")
    assert result.output == "ok: via env"
    assert provider.base_url.startswith(fake.base_url)


def user(content: object) -> dict[str, object]:
    """A user message."""
    return {"role": "user", "content": content}


def assistant(content: object) -> dict[str, object]:
    """An assistant message."""
    return {"role": "assistant", "content": content}


def body_of(*messages: dict[str, object], max_tokens: int | None = 5) -> dict[str, object]:
    """A Messages API request body."""
    return {"model": MODEL_NAME, "messages": list(messages)} | (
        {"max_tokens": max_tokens} if max_tokens else {}
    )


USE = {"type": "tool_use", "id": "toolu_1", "name": "add", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "3"}
TEXT = {"type": "text", "text": "x"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (body_of(user("hi"), max_tokens=None), "max_tokens: Field required"),
        (body_of(), "at least one message"),
        (body_of(assistant("hi")), 'first message must use the "user" role'),
        (body_of(user([RESULT])), "messages.0.content: unexpected `tool_use_id`"),
        (body_of(user("a"), assistant([USE]), user("b")), "messages.1: `tool_use` ids were found without"),
        (body_of(user("a"), user("b"), assistant([USE]), user("c")), "messages.2: `tool_use` ids were found"),
        (body_of(user("a"), assistant([USE]), user([RESULT]), assistant([USE]), user([RESULT])), "unique"),
        (body_of(user("a"), assistant([USE]), user([TEXT, RESULT])), "must come first"),
        (body_of(user("a"), assistant("b"), user([{"type": "text", "text": ""}])), "must be non-empty"),
        (
            body_of(user("a"), assistant([]), user("b")),
            "messages.1: all messages must have non-empty content",
        ),
        (body_of(user("a"), {"role": "system", "content": "b"}), "messages.1.role"),
    ],
)
def test_requests_the_real_api_rejects(fake: FakeAnthropic, body: dict[str, Any], message: str) -> None:
    assert message in (rejection(body) or "")
    response = httpx.post(f"{fake.base_url}/v1/messages", json=body, headers=HEADERS)
    assert response.status_code == 400
    assert response.json()["type"] == "error"
    assert response.json()["error"] == {"type": "invalid_request_error", "message": rejection(body)}


@pytest.mark.parametrize(
    "body",
    [
        body_of(user("a"), assistant("")),  # an empty final assistant turn is a prefill
        body_of(user("a"), user("b")),  # consecutive user turns are merged
        body_of(user("a"), assistant([USE]), user([RESULT, TEXT])),
        body_of(user("a"), assistant([USE])),  # a trailing tool call needs no result yet
    ],
)
def test_requests_the_real_api_accepts(fake: FakeAnthropic, body: dict[str, Any]) -> None:
    response = httpx.post(f"{fake.base_url}/v1/messages", json=body, headers=HEADERS)
    assert response.status_code == 200, response.text
    assert response.json()["content"] == [{"type": "text", "text": f"ok: {last_user_text(body)}"}]
    assert response.json()["usage"]["input_tokens"] > 0


def test_strict_alternation_rejects_consecutive_user_turns() -> None:
    body = body_of(user("a"), user("b"))
    with FakeAnthropic(strict_alternation=True) as fake:
        response = httpx.post(f"{fake.base_url}/v1/messages", json=body, headers=HEADERS)
    assert response.status_code == 400
    assert "alternate" in response.json()["error"]["message"]


def test_count_tokens_and_unknown_paths(fake: FakeAnthropic) -> None:
    body = body_of(user("hello " * 40), max_tokens=None)
    counted = httpx.post(f"{fake.base_url}/v1/messages/count_tokens", json=body, headers=HEADERS)
    assert counted.status_code == 200 and counted.json()["input_tokens"] > 40
    missing = httpx.get(f"{fake.base_url}/v1/models", headers=HEADERS)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error"


async def test_model_lookup_speaks_the_sdks_model_info(fake: FakeAnthropic) -> None:
    fake.api_key = "the-right-key"
    async with AsyncAnthropic(base_url=fake.base_url, api_key="the-right-key", max_retries=0) as client:
        info = await client.models.retrieve("claude-haiku-4-5")
        raw = await client.models.with_raw_response.retrieve("claude-sonnet-4-5")
        with pytest.raises(anthropic.NotFoundError):
            await client.models.retrieve("gpt-4o")
    assert (info.id, info.type, info.lifecycle, info.line) == ("claude-haiku-4-5", "model", "active", "haiku")
    assert info.created_at.year == 2025 and info.deprecated_at is None
    # Every field the SDK's type declares is in the body, and nothing else.
    assert set(raw.http_response.json()) == set(anthropic.types.ModelInfo.model_fields)
    async with AsyncAnthropic(base_url=fake.base_url, api_key="wrong", max_retries=0) as client:
        with pytest.raises(anthropic.AuthenticationError):
            await client.models.retrieve("claude-haiku-4-5")
