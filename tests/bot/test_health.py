"""GET /healthz of the shared route when the database is away (`python -m bot web`'s, a real process, is
tests/bot/timeline/test_web_command.py's)."""

from __future__ import annotations

import socket

import httpx
from starlette.applications import Starlette

from bot.web.health import health_route
from db.engine import create_engine


def free_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_healthz_is_503_while_the_database_does_not_answer() -> None:
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere", pool_size=1)
    transport = httpx.ASGITransport(app=Starlette(routes=[health_route(engine)]))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            health = await http.get("/healthz")
    finally:
        await engine.dispose()
    assert (health.status_code, health.json()) == (503, {"ok": False, "database": "unreachable"})
