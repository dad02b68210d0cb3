"""A load balancer in front of several bot instances (what Cloud Run or Heroku's router does).

Requests go round-robin to the backends; a backend that refuses the connection (a dead instance)
makes that request fail with 502, as a real balancer answers before its health check notices, and
the sender's retry goes to the next backend.
"""

from __future__ import annotations

import itertools
import socket
import threading
import time

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

_FORWARDED = ("content-type", "x-telegram-bot-api-secret-token", "authorization")


class Balancer:
    """`with Balancer(["http://127.0.0.1:8001", ...]) as lb: lb.url`."""

    def __init__(self, backends: list[str]) -> None:
        self.backends = backends
        self._next = itertools.cycle(range(len(backends)))
        self.routed: list[tuple[int, int]] = []  # (backend index, status answered)
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self.port = int(self._sock.getsockname()[1])
        app = Starlette(routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])])
        config = uvicorn.Config(app, log_config=None, log_level="warning", access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def url(self) -> str:
        """The balancer's base URL."""
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: Request) -> Response:
        index = next(self._next)
        headers = {name: value for name, value in request.headers.items() if name.lower() in _FORWARDED}
        try:
            async with httpx.AsyncClient(timeout=120) as client:
                answer = await client.request(
                    request.method,
                    f"{self.backends[index]}{request.url.path}",
                    content=await request.body(),
                    headers=headers,
                )
        except httpx.HTTPError:
            self.routed.append((index, 502))
            return Response("bad gateway", status_code=502)
        self.routed.append((index, answer.status_code))
        return Response(answer.content, status_code=answer.status_code)

    def __enter__(self) -> Balancer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("balancer did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()
