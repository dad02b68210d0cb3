"""`python -m bot run`: a start that cannot work ends in seconds, in one line (its entry point in this
process, and once as a real process), and leaves nothing running; a start given $PORT without
WEBHOOK_URL polls and serves HTTP (real processes)."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from bench.delivery_harness import TOKEN_AND_SECRET, BotProcess, bot_env, echo, until
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.telegram_api import FakeTelegram
from bot.__main__ import main
from tests.conftest import migrated_sqlite_url

WEBHOOK_URL = "https://nikita.example/telegram/webhook"


def free_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(responder=echo, api_key="sk-fake") as fake:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN_AND_SECRET[0]) as fake:
        yield fake


def env_for(tmp_path: Path, telegram_url: str, model: FakeAnthropic, **settings: str) -> dict[str, str]:
    """A bot's environment with its own SQLite file, and its temporary files in `tmp_path`."""
    env = bot_env(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'bot.db'}",
        telegram_url=telegram_url,
        model_url=model.base_url,
        TMPDIR=str(tmp_path),  # the embedded graph's redis-server names its folder in its command line
        **settings,
    )
    for platform in ("PORT", "K_SERVICE", "DYNO"):
        if platform not in settings:
            env.pop(platform, None)
    return env


async def failed_start(
    env: dict[str, str], cwd: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`python -m bot run` to its end; (the result, seconds it took).

    Its entry point runs in this process, in a thread (it runs its own event loop): a start the
    checks refuse ends before anything a process of its own would change (signals, serving), and
    the import of the bot (seconds) is paid once per worker. `test_ephemeral_disk_refused_in_a_real_process`
    holds the same for a real process.
    """
    monkeypatch.chdir(cwd)
    for name in set(os.environ) - set(env):
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    started = time.monotonic()
    code = await asyncio.to_thread(main, ["run"])
    seconds = time.monotonic() - started
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(
        ["python", "-m", "bot", "run"], code, captured.out, captured.err
    ), seconds


def the_one_line(result: subprocess.CompletedProcess[str], says: str) -> str:
    """The failure line: non-zero exit, no traceback, and `says` on the last line of stderr (only there)."""
    assert result.returncode != 0, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and says in lines[-1], result.stderr
    assert sum(says in line for line in lines) == 1, result.stderr
    return lines[-1]


def redis_servers_under(folder: Path) -> list[str]:
    """Command lines of running processes that name `folder` and redis-server."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            command = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended while we looked
            continue
        if "redis-server" in command and str(folder) in command:
            found.append(command)
    return found


async def test_no_network_ends_in_seconds_in_one_line(
    model: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    env = env_for(tmp_path, f"{nowhere}/bot", model, ANTHROPIC_BASE_URL=nowhere)
    result, seconds = await failed_start(env, tmp_path, monkeypatch, capsys)
    line = the_one_line(result, f"cannot reach Telegram at {nowhere.removeprefix('http://')} (ConnectError:")
    print(f"no network: exit {result.returncode} after {seconds:.1f} s: {line}")
    assert line.startswith("start-up check failed: ") and line.endswith(
        "check the network, a proxy, or TELEGRAM_API_BASE_URL"
    )
    # Connection refused is immediate: the time is Python importing the bot (about 3 s on an idle
    # machine), so the bound only catches a check that waits for a timeout or retries.
    assert result.returncode == 1 and seconds < 30


async def test_a_token_telegram_refuses(
    telegram: FakeTelegram,
    model: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = env_for(tmp_path, telegram.base_url, model, TELEGRAM_BOT_TOKEN="123:WRONG")
    result, seconds = await failed_start(env, tmp_path, monkeypatch, capsys)
    line = the_one_line(result, "TELEGRAM_BOT_TOKEN was refused by Telegram")
    assert "@BotFather" in line and "123:WRONG" not in result.stderr
    assert result.returncode == 2 and seconds < 30


async def test_a_key_anthropic_refuses(
    telegram: FakeTelegram,
    model: FakeAnthropic,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    env = env_for(tmp_path, telegram.base_url, model, ANTHROPIC_API_KEY="sk-revoked")
    result, _ = await failed_start(env, tmp_path, monkeypatch, capsys)
    the_one_line(result, "ANTHROPIC_API_KEY was refused by Anthropic")
    assert "sk-revoked" not in result.stderr and result.returncode == 2
    assert telegram.calls_to("getUpdates") == []


@pytest.mark.process
@pytest.mark.slow
async def test_a_stop_while_the_embedded_graph_opens_leaves_no_server(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, migrated_sqlite: Path
) -> None:
    pytest.importorskip("redislite", reason="the embedded graph (falkordblite) is not installed")
    migrated_sqlite_url(migrated_sqlite, tmp_path / "bot.db")  # env_for's database, at the newest revision
    env = env_for(
        tmp_path,
        telegram.base_url,
        model,
        GRAPH_BACKEND="falkordblite",
        GRAPH_PATH=str(tmp_path / "graph" / "graph.db"),
        EMBEDDER="minilm",
        SUMMARY_MODEL="anthropic:claude-haiku-4-5",  # the graph needs a real LLM to be on
    )
    bot = BotProcess("graph-opening", env, tmp_path)
    bot.start()
    try:
        await bot.ready(telegram)  # the graph opens after the process takes updates
        opening = await until(lambda: "knowledge graph opening" in bot.log_path.read_text(), 60)
        assert opening, bot.log_tail()
    finally:
        code = await bot.stop()  # SIGTERM in the middle of the opening (importing, or starting the server)
    log = bot.log_path.read_text()
    assert code == 0, bot.log_tail()
    # The stop waited for the opening and then stopped the server it started.
    assert "embedded FalkorDB started" in log, bot.log_tail()
    assert redis_servers_under(tmp_path) == []


@pytest.mark.process
@pytest.mark.slow
async def test_port_without_webhook_polls_and_serves_http(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path
) -> None:
    port = free_port()
    env = env_for(tmp_path, telegram.base_url, model, PORT=str(port), TASKS_SECRET="t0ken")
    bot = BotProcess("polling+http", env, tmp_path, port=port)
    bot.start()
    try:
        await bot.ready(telegram)  # GET /healthz answered 200
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as http:
            health = await http.get("/healthz")
            assert (health.status_code, health.json()) == (200, {"ok": True})
            assert (await http.post("/telegram/webhook", json={})).status_code == 404  # no webhook route
            assert (await http.post("/tasks/inbox")).status_code == 403  # the task routes are there
            # On the database the start found empty and migrated.
            sessions = await http.post(
                "/tasks/close-idle-conversations", headers={"Authorization": "Bearer t0ken"}
            )
            assert sessions.status_code == 200, sessions.text
        await telegram.wait_for_calls("getUpdates")
        telegram.user_message(4242, "hello over polling")
        [answer] = await telegram.wait_for_messages(1, chat_id=4242, timeout=30)
        assert answer.text == "echo: hello over polling"
        assert telegram.webhook_url == ""
    finally:
        code = await bot.stop()
    assert code == 0, bot.log_tail()
    assert bot.exits[0][1] < 10, bot.exits


def listening_ports(pid: int) -> set[int]:
    """The TCP ports process `pid` listens on (its socket inodes matched against /proc/net/tcp); the cold
    start's bot, polling without PORT, must listen on none (tests/bot/test_cold_start.py)."""
    inodes = {
        target.removeprefix("socket:[").rstrip("]")
        for fd in Path(f"/proc/{pid}/fd").iterdir()
        if (target := os.readlink(fd)).startswith("socket:[")
    }
    rows = [row.split() for row in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]]
    return {int(row[1].split(":")[1], 16) for row in rows if row[3] == "0A" and row[9] in inodes}


@pytest.mark.process
def test_ephemeral_disk_refused_in_a_real_process(tmp_path: Path) -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "ALLOW_EPHEMERAL_STORAGE", "DYNO"}
    }
    env |= {"K_SERVICE": "nikita", "GRAPH_BACKEND": "none", "TELEGRAM_BOT_TOKEN": "123:ABC", "MODEL": "test"}
    result = subprocess.run(
        [sys.executable, "-m", "bot", "run"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    line = the_one_line(result, "but this is Cloud Run (K_SERVICE is set)")
    assert result.returncode == 2 and "ALLOW_EPHEMERAL_STORAGE=true" in line
    assert not (tmp_path / "data").exists()
