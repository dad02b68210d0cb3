"""A fake OpenAI-compatible embeddings server (`POST /v1/embeddings`), as OpenAI, Ollama, vLLM or
llama.cpp serve it, so tests drive the real `openai` SDK through PydanticAI offline.

It speaks the wire format: a bearer key (401 otherwise), a JSON body with `model` and `input` (a
string or a list of strings; 400 otherwise, or when a list is longer than `max_inputs`), an optional
`dimensions`, and `encoding_format` "float" or "base64" (little-endian float32, what the SDK asks
for by default). Vectors are hashed bags of words (`HashingEmbedder`): texts sharing words are close.
`rate_limit(n)` answers the next n requests 429 with a `retry-after-ms` header; `width` is the
model's own width, which a test may change as a provider changing its model would; `delay` holds
every answer that many seconds (a slow provider); `gate`, while cleared, holds every answer until it
is set (a provider that has not answered yet, without timing anything).
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from typing import Any

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.fakes.hashing_embedder import HashingEmbedder
from bench.fakes.serving import LocalServer

Json = dict[str, Any]


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": None}}
    return JSONResponse(body, status_code=status, headers=headers)


class FakeEmbeddings:
    """A started fake is a context manager; `base_url` ends in /v1, as EMBEDDER_BASE_URL expects."""

    def __init__(
        self, *, api_key: str = "sk-local", width: int = 32, max_inputs: int = 2048, retry_after_ms: int = 5
    ) -> None:
        self.api_key = api_key
        self.width = width
        self.max_inputs = max_inputs
        self.retry_after_ms = retry_after_ms
        self.bodies: list[Json] = []  # every request that reached the model (not refused)
        self.refused = 0  # requests answered 429
        self.delay = 0.0
        self.gate = threading.Event()  # the server runs in its own thread: a thread-safe event
        self.gate.set()
        self._limited = 0
        self.app = Starlette(routes=[Route("/v1/embeddings", self._embed, methods=["POST"])])
        self._local = LocalServer(self.app, "FakeEmbeddings")
        self.base_url = ""

    def rate_limit(self, requests: int) -> None:
        """Answer the next `requests` requests with 429 Too Many Requests."""
        self._limited = requests

    async def _embed(self, request: Request) -> JSONResponse:
        if request.headers.get("authorization") != f"Bearer {self.api_key}":
            return _error(401, "Incorrect API key provided", "invalid_request_error")
        if self._limited > 0:
            self._limited -= 1
            self.refused += 1
            headers = {"retry-after-ms": str(self.retry_after_ms)}
            return _error(429, "Rate limit reached for requests", "requests", headers)
        try:
            body = json.loads(await request.body())
        except json.JSONDecodeError:
            return _error(400, "We could not parse the JSON body of your request.", "invalid_request_error")
        texts = body.get("input") if isinstance(body, dict) else None
        texts = [texts] if isinstance(texts, str) else texts
        if not body.get("model") or not isinstance(texts, list) or not texts:
            return _error(400, "'model' and a non-empty 'input' are required", "invalid_request_error")
        if not all(isinstance(t, str) for t in texts) or len(texts) > self.max_inputs:
            return _error(400, f"'input' must be at most {self.max_inputs} strings", "invalid_request_error")
        width = body.get("dimensions") or self.width
        self.bodies.append(body)
        if self.delay > 0:
            await asyncio.sleep(self.delay)
        if not self.gate.is_set():
            await asyncio.to_thread(self.gate.wait)
        vectors = await HashingEmbedder(dimensions=int(width)).embed(texts)
        as_base64 = body.get("encoding_format") == "base64"
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": (
                    base64.b64encode(row.astype("<f4").tobytes()).decode() if as_base64 else row.tolist()
                ),
            }
            for i, row in enumerate(np.asarray(vectors, dtype=np.float32))
        ]
        tokens = sum(len(t.split()) for t in texts)
        return JSONResponse(
            {
                "object": "list",
                "data": data,
                "model": body["model"],
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            }
        )

    def __enter__(self) -> FakeEmbeddings:
        self.base_url = f"{self._local.start()}/v1"
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._local.stop()
