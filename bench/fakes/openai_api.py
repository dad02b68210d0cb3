"""A small fake of an OpenAI-compatible Chat Completions server (what local servers such as vLLM,
llama.cpp or Ollama expose), so tests drive the real `openai` SDK and PydanticAI offline.

`FakeOpenAI` serves `POST /v1/chat/completions` with uvicorn on 127.0.0.1 in a background thread.
A `responder(body)` returns either the arguments of a call of the request's one tool (what
PydanticAI asks for with a structured `output_type`) or a plain text answer; every request body is
recorded. It checks what the real API requires: a bearer key (401 otherwise), a JSON body with
`model` and a non-empty `messages` list (400 otherwise). Usage counts the words of the messages.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.fakes.serving import LocalServer

Json = dict[str, Any]
Responder = Callable[[Json], Json | str]


def _error(status: int, message: str, kind: str) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": None}}, status_code=status)


class FakeOpenAI:
    """A started fake is a context manager; `base_url` ends in /v1, as OPENAI_BASE_URL expects."""

    def __init__(self, responder: Responder, *, api_key: str = "sk-local") -> None:
        self.responder = responder
        self.api_key = api_key
        self.bodies: list[Json] = []
        self.app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        self._local = LocalServer(self.app, "FakeOpenAI")
        self.base_url = ""

    async def _complete(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", "invalid_request_error")
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError:
            return _error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        if not isinstance(body, dict) or not body.get("model") or not body.get("messages"):
            return _error(400, "'model' and a non-empty 'messages' are required", "invalid_request_error")
        self.bodies.append(body)
        answer = self.responder(body)
        words = sum(len(str(m.get("content") or "").split()) for m in body["messages"])
        if isinstance(answer, str):
            message: Json = {"role": "assistant", "content": answer}
            finish = "stop"
        else:
            tool = body["tools"][0]["function"]["name"]
            call: Json = {
                "id": f"call_{len(self.bodies)}",
                "type": "function",
                "function": {"name": tool, "arguments": json.dumps(answer)},
            }
            message, finish = {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"
        return JSONResponse(
            {
                "id": f"chatcmpl-{len(self.bodies)}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": words, "completion_tokens": 7, "total_tokens": words + 7},
            }
        )

    def __enter__(self) -> FakeOpenAI:
        self.base_url = f"{self._local.start()}/v1"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._local.stop()
