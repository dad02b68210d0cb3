"""GET /healthz of `python -m bot web` (a real process) and of the shared route when the database is away."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from bot.web.health import health_route
from db.engine import create_engine
from tests.bot.conftest import TOKEN
from tests.conftest import migrated_sqlite_url


def free_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.process
async def test_web_command_answers_healthz(tmp_path: Path, migrated_sqlite: Path) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "web.db")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k not in {"K_SERVICE", "DYNO", "WEBHOOK_URL"}}
    env |= {"DATABASE_URL": url, "TELEGRAM_BOT_TOKEN": TOKEN, "PORT": str(port), "EMBEDDER": "none"}
    env |= {"GRAPH_BACKEND": "none", "MODEL": "test", "SUMMARY_MODEL": "test", "LOG_LEVEL": "WARNING"}
    process = subprocess.Popen(  # noqa: ASYNC220 (a server process the test talks to over HTTP)
        [sys.executable, "-m", "bot", "web"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 90
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            while True:
                assert process.poll() is None and time.monotonic() < deadline, "bot web did not answer"
                try:
                    health = await http.get("/healthz")
                    break
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        assert (health.status_code, health.json()) == (200, {"ok": True})
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.to_thread(process.communicate, timeout=30)
    assert process.returncode == 0, stderr[-3000:]


async def test_healthz_is_503_while_the_database_does_not_answer() -> None:
    engine = create_engine(f"postgresql+asyncpg://postgres@127.0.0.1:{free_port()}/nowhere", pool_size=1)
    transport = httpx.ASGITransport(app=Starlette(routes=[health_route(engine)]))
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            health = await http.get("/healthz")
    finally:
        await engine.dispose()
    assert (health.status_code, health.json()) == (503, {"ok": False, "database": "unreachable"})
