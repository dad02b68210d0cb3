"""`python -m bot bench trip`: the way one text message takes through the product, counted.

A bot in webhook mode (the fake Bot API, an instant model, a scratch database) gets one private
text message through `POST /telegram/webhook`; from the request until Telegram has the answer,
a profiler records every call into a product module and a cursor hook every SQL statement. After a
warm-up message (imports, caches, the user's first turn), the second message is the one counted:

- modules: the product modules whose code ran (and without the context's collectors, which
  run side by side and say nothing about the path's shape);
- folder moves: the distinct caller -> callee pairs of modules whose top-level folders differ
  (bot -> agent, agent -> db, ...), the arrows a reader follows;
- statements and transactions: what the message cost the database.

Another process's threads (aiosqlite's worker, the fake server) are not traced: only the event
loop's thread, where the product's code runs.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import greenlet  # type: ignore[import-untyped]
import httpx
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import event

from agent.core.settings import Settings
from bench.common import scratch_database
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import build_runtime
from bot.services import services_of
from bot.web.app import build_web_app

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("bot", "agent", "db", "jobs")
TOKEN = "123:ABC"
SECRET = "s3cret"
# Collectors of the context package: each reads one tier, all at once; the path does not run through them.
COLLECTORS = ("agent/context/tiers.py", "agent/context/threads.py", "agent/context/facts.py")


def _instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("ok")])


@dataclass
class Trip:
    """What one message touched."""

    modules: list[str] = field(default_factory=list)
    crossings: set[tuple[str, str]] = field(default_factory=set)
    statements: Counter[str] = field(default_factory=Counter)
    log: list[str] = field(default_factory=list)
    transactions: int = 0

    def folder_moves(self) -> int:
        """Distinct module-to-module calls that cross a top-level folder."""
        return sum(1 for a, b in self.crossings if a.split("/")[0] != b.split("/")[0])


class _Recorder:
    """A profile hook that keeps the product modules called, in first-call order, and their edges."""

    def __init__(self, trip: Trip) -> None:
        self.trip = trip
        self._seen: set[str] = set()
        self._names: dict[str, str | None] = {}

    def _module(self, filename: str) -> str | None:
        if filename in self._names:
            return self._names[filename]
        name: str | None = None
        path = Path(filename)
        if path.is_absolute() and path.is_relative_to(ROOT):
            relative = path.relative_to(ROOT).as_posix()
            if relative.split("/")[0] in PRODUCT:
                name = relative
        self._names[filename] = name
        return name

    def __call__(self, frame: FrameType, what: str, arg: Any) -> None:
        if what != "call":
            return
        callee = self._module(frame.f_code.co_filename)
        if callee is None:
            return
        if callee not in self._seen:
            self._seen.add(callee)
            self.trip.modules.append(callee)
        caller_frame = frame.f_back
        # An awaited coroutine resumes from the loop; the nearest product frame above is its caller.
        while caller_frame is not None:
            caller = self._module(caller_frame.f_code.co_filename)
            if caller is not None:
                if caller != callee:
                    self.trip.crossings.add((caller, callee))
                return
            caller_frame = caller_frame.f_back


async def measure_trip(backend: str) -> Trip | None:
    """One counted message on `backend` ("sqlite" or "postgres"); None when PostgreSQL is unreachable."""
    async with scratch_database(backend) as url:
        if url is None:
            return None
        with FakeTelegram(token=TOKEN) as tg:
            settings = Settings(
                database_url=url,
                telegram_bot_token=TOKEN,
                telegram_api_base_url=tg.base_url,
                webhook_url="https://nikita.example/telegram/webhook",
                webhook_secret=SECRET,
                onboarding_enabled=False,
                # The inbox's periodic claim is the process's, not the message's: not in the count.
                inbox_poll_seconds=600,
                model="test",
                summary_model="test",
                _env_file=None,
            )
            runtime = await build_runtime(
                settings, model=FunctionModel(_instant), migrate=True, summary_model=TestModel()
            )
            try:
                return await _counted(runtime, tg)
            finally:
                await runtime.close()


async def _counted(runtime: Any, tg: FakeTelegram) -> Trip:
    application = build_application(runtime, webhook=True)
    web = build_web_app(application, runtime)
    trip = Trip()
    counting = False
    answers = 0  # the answers Telegram had before the counted message

    def live() -> bool:
        # Until Telegram has the answer: what the sender does after it (its "sent" mark) is not counted.
        return counting and len(tg.sent) == answers

    def on_statement(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if live():
            trip.statements[statement.split(None, 1)[0].upper()] += 1
            trip.log.append(f"  {_connection(conn)} {' '.join(statement.split())[:100]}  <- {_issuer()}")

    def on_begin(conn: Any) -> None:
        if live():
            trip.transactions += 1
            trip.log.append(f"BEGIN {_connection(conn)}  <- {_issuer()}")

    sync_engine = runtime.engine.sync_engine
    event.listen(sync_engine, "before_cursor_execute", on_statement)
    event.listen(sync_engine, "begin", on_begin)
    headers = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
    async with running(application):
        transport = httpx.ASGITransport(app=web)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            for n, text in enumerate(("hello there", "how was your day?"), start=1):
                update = tg.user_message(7, text)
                # The first message's work (its row finished, its embeddings) is done before the
                # counted one.
                await services_of(application).delivery.dispatcher.drain(within=10)
                await runtime.turns.settle()
                recorder = _Recorder(trip) if n == 2 else None
                answers, counting = len(tg.sent), recorder is not None
                if recorder is not None:
                    sys.setprofile(recorder)
                try:
                    await http.post("/telegram/webhook", json=update, headers=headers)
                    await _answered(tg, n)
                finally:
                    sys.setprofile(None)
                    counting = False
    event.remove(sync_engine, "before_cursor_execute", on_statement)
    event.remove(sync_engine, "begin", on_begin)
    return trip


def _connection(conn: Any) -> str:
    """A short name of the DBAPI connection a statement ran on (statements of one transaction share it)."""
    return f"c{id(conn.connection.dbapi_connection) % 997:03d}"


def _issuer() -> str:
    """The innermost product function (outside db/) on the stack: who asked for the statement."""
    fallback = "?"
    frames: list[FrameType | None] = [sys._getframe(2)]
    # SQLAlchemy's async layer runs the statement in a greenlet; its caller waits in the parent's.
    current = greenlet.getcurrent()
    while current.parent is not None:
        current = current.parent
        frames.append(current.gr_frame)
    for frame in _walk(frames):
        path = Path(frame.f_code.co_filename)
        if path.is_relative_to(ROOT):
            relative = path.relative_to(ROOT).as_posix()
            top = relative.split("/")[0]
            if top in PRODUCT:
                where = f"{relative}:{frame.f_code.co_name}"
                if top != "db":
                    return where
                if fallback == "?":
                    fallback = where
    return fallback


def _walk(tops: list[FrameType | None]) -> Iterator[FrameType]:
    for frame in tops:
        while frame is not None:
            yield frame
            frame = frame.f_back


async def _answered(tg: FakeTelegram, n: int, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while len(tg.messages_to(7)) < n:
        if time.monotonic() > deadline:
            raise RuntimeError(f"message {n} was not answered within {seconds} s")
        await asyncio.sleep(0.005)


def _print(backend: str, trip: Trip) -> None:
    outside = [m for m in trip.modules if m not in COLLECTORS]
    folders = Counter(m.split("/")[0] for m in trip.modules)
    print(f"  {backend}:")
    print(
        f"    modules: {len(trip.modules)} ({len(outside)} without the context collectors); "
        + ", ".join(f"{name} {count}" for name, count in sorted(folders.items()))
    )
    print(f"    folder moves (distinct cross-folder calls between modules): {trip.folder_moves()}")
    total = sum(trip.statements.values())
    kinds = ", ".join(f"{kind} {count}" for kind, count in trip.statements.most_common())
    print(f"    SQL statements: {total} ({kinds}); transactions: {trip.transactions}")


async def run_trip_bench(verbose: bool = False) -> None:
    """Print the counted trip of one text message on each database."""
    print("one text message, webhook to the answer sent (instant model, second message of a conversation)")
    for backend in ("sqlite", "postgres"):
        trip = await measure_trip(backend)
        if trip is None:
            print(f"  {backend}: PostgreSQL unreachable, skipped")
            continue
        _print(backend, trip)
        if verbose:
            for module in trip.modules:
                print(f"      {module}")
            for line in trip.log:
                print(f"      | {line}")
