"""A local fake of Anthropic's Messages API, so tests drive the real `anthropic` SDK (and PydanticAI) offline.

`FakeAnthropic` serves a Starlette app with uvicorn on 127.0.0.1 in a background thread; replies are scripted
(`fake.script(...)`) or computed (`responder`), and every request is recorded in `fake.requests`.

Real-API rules it enforces (400 `invalid_request_error` unless noted):
- 401 `authentication_error` without `x-api-key` / `Authorization: Bearer` (or a wrong key when `api_key=`);
- an `anthropic-version` header; a JSON object body with `model`, a positive integer `max_tokens` (not on
  count_tokens) and a non-empty `messages` list;
- roles are "user" or "assistant" and the first message is "user"; consecutive same-role messages are merged
  into one turn, as the API documents (`strict_alternation=True` rejects them instead);
- every message has non-empty content, except an optional final assistant prefill; text blocks are non-empty;
- `tool_use` ids are unique; each assistant `tool_use` is answered by a `tool_result` in the next message
  (when there is one); each `tool_result` names a `tool_use` of the immediately previous assistant message;
  `tool_result` blocks come first in their message.
`GET /v1/models/{model_id}` answers a `ModelInfo` for the models it knows (`models=`: id -> lifecycle; by
default every `claude-` id, active) and 404 `not_found_error` for others, after the same key check.
Unknown paths answer 404 `not_found_error`. Error replies carry `retry-after-ms: 1`, so SDK retries stay fast.
The prompt cache follows the real API's documented rules (`bench.fakes.anthropic_cache`: breakpoints, the
20-block lookback, minimum lengths, 5-minute and 1-hour lifetimes): `usage` reports the tokens read, written
and uncached, and `fake.cache.uses` records what the cache did for each answered request.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_ai.models import override_allow_model_requests
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from bench.fakes import anthropic_cache
from bench.fakes.anthropic_cache import PromptCache, estimate_tokens
from bench.fakes.serving import LocalServer

Json = dict[str, Any]


@dataclass(frozen=True)
class Reply:
    """A successful assistant message: its content blocks, stop reason and optional usage override."""

    content: list[Json]
    stop_reason: str = "end_turn"
    usage: Json | None = None

    @classmethod
    def text(cls, text: str) -> Reply:
        """A plain text answer."""
        return cls([{"type": "text", "text": text}])

    @classmethod
    def tool_call(cls, name: str, input: Json, *, id: str | None = None, text: str | None = None) -> Reply:
        """A call of tool `name` with `input`, optionally preceded by some text."""
        block = {
            "type": "tool_use",
            "id": id or f"toolu_{uuid.uuid4().hex[:24]}",
            "name": name,
            "input": input,
        }
        return cls([*([{"type": "text", "text": text}] if text else []), block], stop_reason="tool_use")

    @classmethod
    def blocks(cls, *blocks: Json) -> Reply:
        """Any content blocks; the stop reason is `tool_use` when one of them is a tool call."""
        uses_tool = any(block.get("type") == "tool_use" for block in blocks)
        return cls(list(blocks), stop_reason="tool_use" if uses_tool else "end_turn")


@dataclass(frozen=True)
class ApiError:
    """An error reply, e.g. `ApiError(529, "overloaded_error")`; `in_stream`: an error event in a stream."""

    status: int
    error_type: str
    message: str = "Simulated error from the fake Anthropic API"
    retry_after_ms: int | None = 1
    in_stream: bool = False


Outcome = Reply | ApiError | str
Lifecycle = Literal["active", "deprecated", "retired"]
Responder = Callable[[Json], Outcome]
ScriptItem = Outcome | Responder


@dataclass(frozen=True)
class RecordedRequest:
    """One request the fake received."""

    path: str
    headers: dict[str, str]
    body: Json = field(default_factory=dict)


class _Invalid(Exception):
    """A request the real API would reject with 400 (internal to the fake)."""


# Text blocks an application adds to a user turn that the person did not write: the bot's note of
# what the turn was sent with, and PydanticAI's mid-conversation system entries.
_FRAMES = ("<this_turn>", "<system>")


def last_user_text(body: Json) -> str:
    """The person's text in the last user message of a request body (its text blocks joined, the
    application's frames left out), or ''."""
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str):
                return content
            return " ".join(
                b.get("text", "")
                for b in content or []
                if b.get("type") == "text" and not b.get("text", "").startswith(_FRAMES)
            )
    return ""


def default_responder(body: Json) -> Outcome:
    """The reply when nothing is scripted: `ok: <last user text>`."""
    return Reply.text(f"ok: {last_user_text(body)}")


def _turns(messages: list[Json], strict: bool) -> list[tuple[str, list[Json], int]]:
    """(role, blocks, index of its first message) per turn, consecutive same-role messages merged."""
    turns: list[tuple[str, list[Json], int]] = []
    for i, message in enumerate(messages):
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise _Invalid(f"messages.{i}.role: Input should be 'user' or 'assistant'")
        blocks = (
            ([{"type": "text", "text": content}] if content else []) if isinstance(content, str) else content
        )
        if not isinstance(blocks, list) or not all(isinstance(b, dict) and "type" in b for b in blocks):
            raise _Invalid(f"messages.{i}.content: Input should be a valid list or string")
        if not blocks and not (role == "assistant" and i == len(messages) - 1):
            raise _Invalid(
                f"messages.{i}: all messages must have non-empty content except for the optional final"
                " assistant message"
            )
        if any(b["type"] == "text" and not b.get("text") for b in blocks):
            raise _Invalid("messages: text content blocks must be non-empty")
        if turns and turns[-1][0] == role:
            if strict:
                raise _Invalid(f'messages.{i}: roles must alternate between "user" and "assistant"')
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, list(blocks), i))
    return turns


def _check(body: Json, *, strict_alternation: bool, needs_max_tokens: bool) -> None:
    max_tokens, messages = body.get("max_tokens"), body.get("messages")
    if not isinstance(body.get("model"), str):
        raise _Invalid("model: Field required")
    if needs_max_tokens and max_tokens is None:
        raise _Invalid("max_tokens: Field required")
    if needs_max_tokens and (type(max_tokens) is not int or max_tokens < 1):
        raise _Invalid("max_tokens: Input should be a valid integer greater than or equal to 1")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _Invalid("messages: Field required")
    if not messages:
        raise _Invalid("messages: at least one message is required")
    if messages[0].get("role") != "user":
        raise _Invalid('messages: first message must use the "user" role')
    turns = _turns(messages, strict_alternation)
    ids = [b.get("id") for _, blocks, _ in turns for b in blocks if b["type"] == "tool_use"]
    if len(ids) != len(set(ids)):
        raise _Invalid("messages: `tool_use` ids must be unique")
    uses: set[str] = set()  # the tool_use ids of the previous assistant turn
    previous = 0
    for role, blocks, i in turns:
        results = [b.get("tool_use_id") for b in blocks if b["type"] == "tool_result"]
        if stray := [r for r in results if r not in uses]:
            raise _Invalid(
                f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {stray[0]}."
                " Each `tool_result` block must have a corresponding `tool_use` block in the previous"
                " message."
            )
        if missing := sorted(uses - set(results)):
            raise _Invalid(
                f"messages.{previous}: `tool_use` ids were found without `tool_result` blocks immediately"
                f" after: {', '.join(missing)}. Each `tool_use` block must have a corresponding `tool_result`"
                " block in the next message."
            )
        kinds = [b["type"] == "tool_result" for b in blocks]
        if kinds != sorted(kinds, reverse=True):
            raise _Invalid(f"messages.{i}: `tool_result` blocks must come first in the message content")
        uses = {str(b.get("id")) for b in blocks if b["type"] == "tool_use"} if role == "assistant" else set()
        previous = i


def rejection(body: Json, *, strict_alternation: bool = False, needs_max_tokens: bool = True) -> str | None:
    """The 400 message the fake (like the real API) gives this request body, or None when it is valid."""
    try:
        _check(body, strict_alternation=strict_alternation, needs_max_tokens=needs_max_tokens)
    except _Invalid as exc:
        return str(exc)
    return anthropic_cache.rejection(body)


def _error(status: int, error_type: str, message: str, retry_after_ms: int | None = None) -> JSONResponse:
    request_id = f"req_fake_{uuid.uuid4().hex[:20]}"
    headers = {"request-id": request_id} | (
        {} if retry_after_ms is None else {"retry-after-ms": str(retry_after_ms)}
    )
    body = {"type": "error", "error": {"type": error_type, "message": message}, "request_id": request_id}
    return JSONResponse(body, status_code=status, headers=headers)


def _sse(event: str, data: Json) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def _stream_events(message: Json) -> Iterator[bytes]:
    """The events of a streamed message, as the real API sends them (text split by words, JSON in 16s)."""
    start = {**message, "content": [], "stop_reason": None, "usage": {**message["usage"], "output_tokens": 1}}
    yield _sse("message_start", {"type": "message_start", "message": start})
    yield _sse("ping", {"type": "ping"})
    for index, block in enumerate(message["content"]):
        opening, deltas = block, []
        if block["type"] == "text":
            opening = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": t} for t in re.findall(r"\S+\s*|\s+", block["text"])]
        elif block["type"] == "tool_use":
            opening, arguments = {**block, "input": {}}, json.dumps(block["input"])
            parts = [arguments[i : i + 16] for i in range(0, len(arguments), 16)]
            deltas = [{"type": "input_json_delta", "partial_json": part} for part in parts]
        yield _sse(
            "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}
        )
        for delta in deltas:
            yield _sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})
        yield _sse("content_block_stop", {"type": "content_block_stop", "index": index})
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield _sse("message_delta", {"type": "message_delta", "delta": delta, "usage": message["usage"]})
    yield _sse("message_stop", {"type": "message_stop"})


class FakeAnthropic:
    """Anthropic's Messages API on a free local port: `with FakeAnthropic() as fake: fake.base_url`."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        responder: Responder = default_responder,
        strict_alternation: bool = False,
        delay: float = 0.0,
        models: Mapping[str, Lifecycle] | None = None,
        clock: Callable[[], float] = time.monotonic,
        min_cache_tokens: int | None = None,
    ) -> None:
        self.api_key = api_key  # when set, any other key is refused
        self.models = models  # what GET /v1/models/{id} knows; None: every `claude-` id, active
        self.responder = responder  # asked when the script is empty
        self.strict_alternation = strict_alternation
        self.delay = delay  # seconds each /v1/messages answer takes, like a model thinking
        self.requests: list[RecordedRequest] = []
        # `clock` (seconds) times cache entries; `min_cache_tokens` overrides the minimum cacheable prefix.
        self.cache = PromptCache(clock=clock, min_tokens=min_cache_tokens)
        self._queue: deque[ScriptItem] = deque()
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._base_url: str | None = None
        self.app = Starlette(
            routes=[
                Route("/v1/messages", self._messages, methods=["POST"]),
                Route("/v1/messages/count_tokens", self._count_tokens, methods=["POST"]),
                Route("/v1/models/{model_id}", self._model, methods=["GET"]),
                Route("/{path:path}", self._not_found, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
            ]
        )
        self._local = LocalServer(self.app, "FakeAnthropic")

    @property
    def base_url(self) -> str:
        """The URL to give the SDK (`base_url=` or `ANTHROPIC_BASE_URL`)."""
        if self._base_url is None:
            raise RuntimeError("FakeAnthropic is not started")
        return self._base_url

    @property
    def pending(self) -> int:
        """How many scripted responses have not been used yet."""
        return len(self._queue)

    def script(self, *items: ScriptItem) -> None:
        """Queue responses, one per `/v1/messages` request: a `str` is a text reply, a callable is asked."""
        with self._lock:
            self._queue.extend(items)

    def message_bodies(self) -> list[Json]:
        """The JSON bodies of the `/v1/messages` requests received so far (count_tokens left out)."""
        return [r.body for r in self.requests if r.path == "/v1/messages"]

    def start(self) -> FakeAnthropic:
        """Serve in a background thread; returns once the port accepts connections."""
        self._base_url = self._local.start()
        return self

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        self._local.stop()
        self._base_url = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _read(self, request: Request, *, needs_max_tokens: bool) -> Json | Response:
        """Record the request; answer the errors every endpoint shares (auth, headers, validation)."""
        try:
            body = json.loads(await request.body() or b"null")
        except json.JSONDecodeError:
            body = None
        except ClientDisconnect:  # the bot process was killed mid-request: nobody to answer
            return _error(400, "invalid_request_error", "client disconnected")
        headers = request.headers
        self.requests.append(
            RecordedRequest(request.url.path, dict(headers), body if isinstance(body, dict) else {})
        )
        refused = self._refusal(request)
        if refused is not None:
            return refused
        if not isinstance(body, dict):
            return _error(
                400, "invalid_request_error", "There was an error parsing the body as a JSON object"
            )
        problem = rejection(
            body, strict_alternation=self.strict_alternation, needs_max_tokens=needs_max_tokens
        )
        return body if problem is None else _error(400, "invalid_request_error", problem)

    def _refusal(self, request: Request) -> Response | None:
        """The 401 or 400 every endpoint gives a request without a valid key or API version."""
        headers = request.headers
        key = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ").strip()
        if not key:
            return _error(401, "authentication_error", "x-api-key header is required")
        if self.api_key is not None and key != self.api_key:
            return _error(401, "authentication_error", "invalid x-api-key")
        if "anthropic-version" not in headers:
            return _error(400, "invalid_request_error", "anthropic-version: header is required")
        return None

    async def _model(self, request: Request) -> Response:
        self.requests.append(RecordedRequest(request.url.path, dict(request.headers)))
        refused = self._refusal(request)
        if refused is not None:
            return refused
        model_id = request.path_params["model_id"]
        known = {model_id: "active"} if self.models is None and model_id.startswith("claude-") else {}
        lifecycle = (self.models if self.models is not None else known).get(model_id)
        if lifecycle is None:
            return _error(404, "not_found_error", f"model: {model_id}")
        line = next((name for name in ("haiku", "sonnet", "opus") if name in model_id), None)
        info: Json = {"type": "model", "id": model_id, "display_name": model_id.replace("-", " ").title()}
        info |= {"created_at": "2025-09-29T00:00:00Z", "lifecycle": lifecycle, "line": line}
        info |= {"deprecated_at": None if lifecycle == "active" else "2026-01-01T00:00:00Z"}
        info |= {"retires_at": None if lifecycle == "active" else "2026-06-01T00:00:00Z"}
        info |= {"max_input_tokens": 200_000, "max_tokens": 64_000, "capabilities": None}
        return JSONResponse(info, headers={"request-id": f"req_fake_{uuid.uuid4().hex[:20]}"})

    async def _messages(self, request: Request) -> Response:
        body = await self._read(request, needs_max_tokens=True)
        if isinstance(body, Response):
            return body
        if self.delay:
            await asyncio.sleep(self.delay)
        with self._lock:
            item = self._queue.popleft() if self._queue else self.responder
        outcome = item(body) if callable(item) else item
        outcome = Reply.text(outcome) if isinstance(outcome, str) else outcome
        stream = body.get("stream") is True
        if isinstance(outcome, ApiError) and outcome.in_stream and stream:
            error = {"type": "error", "error": {"type": outcome.error_type, "message": outcome.message}}
            return StreamingResponse(iter([_sse("error", error)]), media_type="text/event-stream")
        if isinstance(outcome, ApiError):
            return _error(outcome.status, outcome.error_type, outcome.message, outcome.retry_after_ms)
        usage = self.cache.use(body).usage() | {"output_tokens": estimate_tokens(outcome.content)}
        usage |= outcome.usage or {}
        message: Json = {"id": f"msg_fake_{next(self._ids):06d}", "type": "message", "role": "assistant"}
        message |= {"model": body["model"], "content": outcome.content, "stop_reason": outcome.stop_reason}
        message |= {"stop_sequence": None, "usage": usage}
        headers = {"request-id": f"req_fake_{uuid.uuid4().hex[:20]}"}
        if stream:
            return StreamingResponse(_stream_events(message), media_type="text/event-stream", headers=headers)
        return JSONResponse(message, headers=headers)

    async def _count_tokens(self, request: Request) -> Response:
        body = await self._read(request, needs_max_tokens=False)
        if isinstance(body, Response):
            return body
        return JSONResponse({"input_tokens": anthropic_cache.total_tokens(body)})

    async def _not_found(self, request: Request) -> Response:
        return _error(404, "not_found_error", f"Not found: {request.method} {request.url.path}")


def fake_anthropic_server() -> Iterator[FakeAnthropic]:
    """Body of a pytest fixture (`yield from` it): a started fake, with PydanticAI model requests allowed."""
    with FakeAnthropic() as fake, override_allow_model_requests(True):
        yield fake
