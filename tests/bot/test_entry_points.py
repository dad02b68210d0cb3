"""The entry points hosts run beside `python -m bot run`, on a database never migrated: each migrates
first, as the bot's start does (`bot chat` and `bot reindex` are tested in their own files, /tasks
with the bot's start in test_start.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from db.migrate import schema_at_head

pytestmark = pytest.mark.process


def env_for(url: str, **settings: str) -> dict[str, str]:
    """A process's environment on its own database, offline."""
    env = {k: v for k, v in os.environ.items() if k not in {"K_SERVICE", "DYNO", "WEBHOOK_URL"}}
    return env | {
        "DATABASE_URL": url,
        "GRAPH_BACKEND": "none",
        "EMBEDDER": "none",
        "MODEL": "test",
        "SUMMARY_MODEL": "test",
        **settings,
    }


async def test_a_job_migrates_a_database_never_migrated(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'jobs.db'}"
    for _ in range(2):  # the second run finds it at the newest revision
        done = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "bot", "jobs", "run", "sessions"],
            env=env_for(url),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout.splitlines()[-1])["job"] == "sessions"
        assert await schema_at_head(url)


async def test_the_web_pages_migrate_a_database_never_migrated(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'web.db'}"
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen(  # noqa: ASYNC220 (a server process the test talks to over HTTP)
        [sys.executable, "-m", "bot", "web"],
        env=env_for(url, PORT=str(port), TELEGRAM_BOT_TOKEN="123:ABC"),
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline, healthy = time.monotonic() + 90, False
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=2) as http:
            while not healthy and time.monotonic() < deadline:
                assert process.poll() is None, process.communicate()[1][-3000:]
                try:
                    healthy = (await http.get("/healthz")).status_code == 200
                except httpx.TransportError:
                    await asyncio.sleep(0.1)
        assert healthy
        assert await schema_at_head(url)
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.to_thread(process.wait, 30)
    assert process.returncode == 0, process.communicate()[1][-3000:]


# What the entry points load, and a job's model without its key: none of it needs the Anthropic SDK
# (about a second at every start), which a process imports only to call an Anthropic model. The
# command line itself and `migrate` run no model: they load neither the models' library nor the
# graph's (about two seconds at every `python -m bot migrate`, `jobs`, `--help` or refused start).
SDK_PROBE = """
import sys
import bot.__main__, db.migrate, jobs.registry
bot.__main__._parser(), bot.__main__._no_banner()
print(sorted({m.split(".")[0] for m in sys.modules} & {"pydantic_ai", "graphiti_core", "anthropic"}))
import bot.app, bot.cli.chat, bot.cli.jobs, bot.web.serve
from agent.core.errors import MissingModelKeyError
from agent.core.models import build_model
from agent.core.settings import Settings
try:
    build_model("anthropic:claude-sonnet-5-5", Settings(_env_file=None, anthropic_api_key=None))
except MissingModelKeyError:
    pass
build_model("demo", Settings(_env_file=None))
print(sorted(m for m in sys.modules if m.split(".")[0] == "anthropic" or m.endswith(".anthropic")))
"""


def test_a_process_without_an_anthropic_model_never_imports_the_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SDK_PROBE],
        cwd=Path(__file__).resolve().parents[2],
        env=env_for("sqlite+aiosqlite:///:memory:"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    command_line, entry_points = done.stdout.strip().splitlines()[-2:]
    assert (command_line, entry_points) == ("[]", "[]")
