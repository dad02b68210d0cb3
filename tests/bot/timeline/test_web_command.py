"""`python -m bot web` as a real process: the timeline for a polling bot and /healthz, no webhook, stops on
SIGTERM."""

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
from alembic import command
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.fakes.telegram_webapp import sign_init_data
from db.migrate import alembic_config
from tests.bot.conftest import TOKEN
from tests.bot.timeline.seed import ANA, seed_timeline

pytestmark = pytest.mark.process


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _until_up(base: str, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 90
    async with httpx.AsyncClient(base_url=base) as http:
        while time.monotonic() < deadline:
            assert process.poll() is None, process.communicate()[1][-3000:]
            try:
                if (await http.get("/timeline")).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.2)
    raise AssertionError("python -m bot web did not answer")


async def test_web_command_serves_the_timeline_without_the_webhook(
    database_url: str, sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    await seed_timeline(sessions)
    # The fixture's schema is the models' (create_all): record it as the newest revision, as a
    # migrated database is, or the command would migrate it first.
    await asyncio.to_thread(command.stamp, alembic_config(database_url), "head")
    port = _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "PORT": str(port),
        "EMBEDDER": "none",
        "GRAPH_BACKEND": "none",
        "MODEL": "test",
        "SUMMARY_MODEL": "test",
        "LOG_LEVEL": "WARNING",
    }
    process = subprocess.Popen(  # noqa: ASYNC220 (a server process the test talks to over HTTP)
        [sys.executable, "-m", "bot", "web"],
        cwd=tmp_path,  # no .env from the checkout
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        await _until_up(base, process)
        # The process runs on the wall clock, so Telegram "signs" now.
        init_data = sign_init_data(TOKEN, user={"id": ANA, "first_name": "Ana"}, auth_date=int(time.time()))
        async with httpx.AsyncClient(base_url=base) as http:
            health = await http.get("/healthz")
            assert (health.status_code, health.json()) == (200, {"ok": True})
            days = await http.get("/timeline/api/days", headers={"Authorization": f"tma {init_data}"})
            assert days.status_code == 200
            assert [d["day"] for d in days.json()["days"]] == ["2026-03-03", "2026-03-02", "2026-03-01"]
            assert (await http.get("/timeline/api/days")).status_code == 401
            assert (await http.post("/telegram/webhook", json={})).status_code == 404
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=30)
    assert process.returncode == 0, stderr[-3000:]


def test_web_command_needs_the_bot_token(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TELEGRAM_BOT_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "bot", "web"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2 and "TELEGRAM_BOT_TOKEN" in done.stderr
