"""`python -m bot bench delivery`: every message stored once and answered once, under faults.

Real `python -m bot run` processes serve 50 users x 20 messages through the fake Bot API (it
forgets confirmed updates and retries webhook deliveries like Telegram) with a fake model that
takes 0.15 s per answer, while faults strike in turn: SIGTERM and kill -9 in polling mode on
SQLite; on PostgreSQL, two webhook instances behind a balancer get a SIGTERM, a kill -9, every
database connection terminated, a restart of the (private) server, and one instance killed for
good. Printed per run: messages lost / unanswered / answered twice / stored twice, p50 and p95
reply latency. Then the other users' latency during one user's 300-message burst against a run
without it, and the inbox's own cost per turn (the turn with and without the inbox, in process).

The fakes live in `bench/fakes`: run it from a checkout (`python -m bot bench delivery`).
"""

from __future__ import annotations

import asyncio
import signal
import socket
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import text

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.common import describe, percentile, scratch_database
from bench.delivery_harness import BotProcess, Crowd, Tally, bot_env, echo, run_crowd
from bench.pg_cluster import ClusterUnavailableError, PrivateCluster
from bot.delivery.inbox import UpdateInbox
from bot.delivery.worked_row import WorkedRow
from db.engine import create_engine, session_factory
from db.inbox import LeasedUpdate, NewUpdate

MODEL_SECONDS = 0.15


@dataclass(frozen=True)
class Scenario:
    """One run: which database and mode, how many instances, which faults (in order)."""

    name: str
    backend: str  # sqlite | postgres | private (a PostgreSQL server of our own, restartable)
    mode: str  # polling | webhook
    faults: tuple[str, ...] = ()
    instances: int = 1
    burst: int = 0


# 1,000 real turns take minutes on a 2-core machine, so the faults share two full-size runs, in
# order: each strikes once the previous one's share of the messages was answered.
SCENARIOS = (
    Scenario("no fault", "postgres", "polling"),
    Scenario("SIGTERM, kill -9", "sqlite", "polling", ("sigterm", "kill")),
    Scenario(
        "2 instances: SIGTERM, kill -9, connections dropped, server restart, 1 killed for good",
        *("private", "webhook", ("sigterm", "kill@1", "drop", "restart", "kill-one")),
        instances=2,
    ),
    Scenario("burst of 300 from one user", "postgres", "polling", burst=300),
)
# A smoke run of the bench itself: the faults have tests of their own (tests/bot/test_delivery_faults.py).
QUICK = (Scenario("no fault", "sqlite", "polling"), Scenario("burst of 20", "sqlite", "polling", burst=20))


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@asynccontextmanager
async def database(backend: str) -> AsyncIterator[tuple[str | None, PrivateCluster | None]]:
    """A migrated scratch database of the backend (None when unavailable), and its private server."""
    if backend != "private":
        async with scratch_database(backend) as url:
            yield url, None
        return
    try:
        cluster = PrivateCluster().start()
    except ClusterUnavailableError:
        yield None, None
        return
    try:
        async with scratch_database("postgres", cluster.url("postgres")) as url:
            yield url, cluster
    finally:
        cluster.stop()


async def drop_connections(database_url: str) -> None:
    """Terminate every connection to this database (ours excepted): what a failover does to clients."""
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.execute(
                text(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
    finally:
        await engine.dispose()


async def run_scenario(
    scenario: Scenario,
    *,
    tg: Any,
    model_url: str,
    folder: Path,
    database_url: str,
    users: int,
    messages: int,
    cluster: PrivateCluster | None = None,
    balancer: Callable[[list[str]], Any] | None = None,
    **settings: str,
) -> tuple[Tally, list[BotProcess]]:
    """Start the instances, run the crowd with the scenario's faults, stop everything, count."""
    ports = [free_port() for _ in range(scenario.instances)] if scenario.mode == "webhook" else []
    async with AsyncExitStack() as stack:
        webhook_url: str | None = None
        if ports:
            base = f"http://127.0.0.1:{ports[0]}"
            if scenario.instances > 1:
                assert balancer is not None, "two webhook instances need a balancer in front"
                base = stack.enter_context(balancer([f"http://127.0.0.1:{p}" for p in ports])).url
            webhook_url = f"{base}/telegram/webhook"
        bots = [
            BotProcess(
                f"{scenario.backend}-{scenario.mode}-{'-'.join(scenario.faults) or 'none'}-{i}",
                bot_env(
                    database_url=database_url,
                    telegram_url=tg.base_url,
                    model_url=model_url,
                    port=ports[i] if ports else None,
                    webhook_url=webhook_url,
                    **settings,
                ),
                folder,
                ports[i] if ports else None,
            )
            for i in range(scenario.instances)
        ]
        for bot in bots:
            bot.start()
        stack.push_async_callback(lambda: asyncio.gather(*(b.stop() for b in bots)))
        for bot in bots:
            await bot.ready(tg)
        crowd = Crowd(tg, users, messages, burst=scenario.burst)
        faults = [
            ((n + 1) / (len(scenario.faults) + 1), fault_action(kind, bots, tg, database_url, cluster))
            for n, kind in enumerate(scenario.faults)
        ]
        result = await run_crowd(crowd, database_url, faults)
    return result, bots


def fault_action(
    kind: str, bots: list[BotProcess], tg: Any, database_url: str, cluster: PrivateCluster | None
) -> Callable[[], Awaitable[None]]:
    """What a fault does ("kill@1": to the second instance), for the crowd runner to call."""

    name, _, which = kind.partition("@")
    bot = bots[int(which or 0)]

    async def restart_after(sig: signal.Signals) -> None:
        await bot.stop(sig)
        bot.start()
        await bot.ready(tg)

    async def act() -> None:
        if name == "sigterm":
            await restart_after(signal.SIGTERM)
        elif name == "kill":
            await restart_after(signal.SIGKILL)
        elif name == "kill-one":
            await bot.stop(signal.SIGKILL)  # for good: the other instance takes its rows over
        elif name == "drop":
            await drop_connections(database_url)
        elif name == "restart":
            assert cluster is not None
            await asyncio.to_thread(cluster.restart)
        else:
            raise ValueError(f"unknown fault {kind!r}")

    return act


def _instant(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("ok")])


@dataclass
class _Collect:
    """Stands in for the dispatcher: keeps the rows the intake leased, and when it handed them over."""

    holder: str = "bench"
    lease: timedelta = timedelta(seconds=20)
    rows: list[tuple[LeasedUpdate, asyncio.Future[bool] | None]] = field(default_factory=list)
    handed: asyncio.Event = field(default_factory=asyncio.Event)
    handed_at: float = 0.0

    def reserve(self, wanted: int) -> int:
        return wanted

    def adopt(
        self, rows: list[LeasedUpdate], reserved: int, stored: asyncio.Future[bool] | None = None, *_: object
    ) -> None:
        self.rows.extend((row, stored) for row in rows)
        self.handed_at = time.perf_counter()
        self.handed.set()


@dataclass
class Overhead:
    """Turn times in ms without and with the inbox, the inbox's own time on the reply's path (the
    store-and-lease statement before the turn starts), and the commit that follows Telegram's
    acceptance of the reply (recording it and marking the row done: one UPDATE)."""

    bypassed: list[float] = field(default_factory=list)
    with_inbox: list[float] = field(default_factory=list)
    own: list[float] = field(default_factory=list)
    done: list[float] = field(default_factory=list)


async def inbox_overhead(url: str, turns: int) -> Overhead:
    """Turns without and with the inbox, interleaved, as the bot runs them: the turn starts once
    its row is leased, while the intake's commit (Telegram's acknowledgement) finishes."""
    settings = Settings(database_url=url, model="test", _env_file=None)
    engine = create_engine(url)
    sessions = session_factory(engine)
    clock = FrozenClock(current=datetime(2026, 3, 3, 9, 0, tzinfo=UTC))
    model = FunctionModel(_instant)
    service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, model=model)
    now = clock.now()
    user, _ = await get_or_create_user(sessions, key="telegram:77", now=now, timezone="UTC", telegram_id=77)
    collect = _Collect()
    inbox = UpdateInbox(sessions, clock, dispatcher=collect)
    found = Overhead()
    for i in range(2 * turns + 6):
        at = clock.now() + timedelta(seconds=20 * i)
        counted = i >= 6  # warm-up turns are not counted
        started = time.perf_counter()
        if i % 2:
            await service.reply(Incoming(owner=user.id, text=f"turn {i}", sent_at=at, telegram_message_id=i))
            if counted:
                found.bypassed.append((time.perf_counter() - started) * 1000)
            continue
        collect.handed.clear()
        update = NewUpdate(i, 77, 77, {"update_id": i, "message": {"text": f"turn {i}"}})
        received = asyncio.create_task(inbox.receive([update]))
        await collect.handed.wait()
        row, stored = collect.rows.pop()
        held = clock.now() + timedelta(minutes=1)
        delivery = WorkedRow(row, collect.holder, sessions, clock, stored=stored, held_until=held)
        said = Incoming(owner=user.id, text=f"turn {i}", sent_at=at, telegram_message_id=i)
        delivery.answer((await service.reply(said)).text)
        elapsed = (time.perf_counter() - started) * 1000
        await received
        marked = time.perf_counter()
        await delivery.close("answered")  # what follows Telegram's acceptance of the reply
        if counted:
            found.with_inbox.append(elapsed)
            found.own.append((collect.handed_at - started) * 1000)
            found.done.append((time.perf_counter() - marked) * 1000)
    await service.close()
    await engine.dispose()
    return found


def _row(scenario: Scenario, result: Tally | None, note: str = "") -> str:
    label = f"  {scenario.backend} {scenario.mode} x{scenario.instances}: {scenario.name}"
    if result is None:
        return f"{label}\n      skipped: {note}"
    latency = result.latencies_ms or [0.0]
    return (
        f"{label}\n      sent {result.sent}  lost {result.lost}  unanswered {result.unanswered}  "
        f"answered twice {result.answered_twice} (rows resumed with a recorded reply "
        f"{result.resumed_sends})  stored twice {result.stored_twice}  out of order {result.out_of_order}  "
        f"p50 {percentile(latency, 50):.0f} ms  p95 {percentile(latency, 95):.0f} ms  "
        f"({result.seconds:.0f} s)"
    )


async def run_delivery_bench(settings: Settings, *, quick: bool = False) -> dict[str, Any]:
    """Print the figures; return them (the quick test reads them)."""
    from bench.fakes.anthropic_api import FakeAnthropic
    from bench.fakes.balancer import Balancer
    from bench.fakes.telegram_api import FakeTelegram

    users, messages = (6, 4) if quick else (50, 20)
    scenarios = QUICK if quick else SCENARIOS
    figures: dict[str, Any] = {"scenarios": {}}
    print(f"delivery: {users} users x {messages} messages, a {MODEL_SECONDS:.2f} s model, bot processes")
    with tempfile.TemporaryDirectory() as tmp, FakeAnthropic(responder=echo, delay=MODEL_SECONDS) as model:
        for scenario in scenarios:
            async with database(scenario.backend) as (url, cluster):
                if url is None:
                    print(_row(scenario, None, "PostgreSQL unavailable"), flush=True)
                    continue
                async with FakeTelegram(token="123:ABC") as tg:
                    result, _ = await run_scenario(
                        scenario,
                        tg=tg,
                        model_url=model.base_url,
                        folder=Path(tmp),
                        database_url=url,
                        users=users,
                        messages=messages,
                        cluster=cluster,
                        balancer=Balancer,
                    )
            figures["scenarios"][scenario] = result
            print(_row(scenario, result), flush=True)
    figures["burst"] = _print_burst(figures["scenarios"])
    figures["overhead"] = await _print_overhead(10 if quick else 200)
    return figures


def _print_burst(results: dict[Scenario, Tally]) -> tuple[float, float] | None:
    """Everyone else's latency with a burst against the same run without one (same backend)."""
    burst = next((s for s in results if s.burst), None)
    calm = next(
        (s for s in results if not s.burst and not s.faults and burst and s.backend == burst.backend), None
    )
    if burst is None or calm is None:
        return None
    during, without = results[burst].latencies_ms, results[calm].latencies_ms
    added = (
        percentile(during, 50) - percentile(without, 50),
        percentile(during, 95) - percentile(without, 95),
    )
    print(
        f"other users' reply latency during one user's burst of {burst.burst}: "
        f"p50 {added[0]:+.0f} ms, p95 {added[1]:+.0f} ms against the run without it"
    )
    return added


async def durable_commit_ms(url: str, count: int = 60) -> list[float]:
    """What one durable commit of a one-row insert costs here (mostly the disk flush on PostgreSQL)."""
    engine = create_engine(url)
    timings: list[float] = []
    try:
        async with engine.begin() as conn:
            await conn.execute(text("CREATE TABLE IF NOT EXISTS bench_commit (x INTEGER)"))
        for _ in range(count):
            started = time.perf_counter()
            async with engine.begin() as conn:
                await conn.execute(text("INSERT INTO bench_commit VALUES (1)"))
            timings.append((time.perf_counter() - started) * 1000)
    finally:
        await engine.dispose()
    return timings


async def _print_overhead(turns: int) -> dict[str, tuple[float, float]]:
    print(f"inbox cost per turn (instant model, {turns} turns each way, in process)")
    found: dict[str, tuple[float, float]] = {}
    for backend in ("sqlite", "postgres"):
        async with scratch_database(backend) as url:
            if url is None:
                print(f"  {backend:8} PostgreSQL unreachable, skipped")
                continue
            o = await inbox_overhead(url, turns)
            commit = await durable_commit_ms(url)
        added = percentile(o.with_inbox, 95) - percentile(o.bypassed, 95)
        found[backend] = (percentile(o.own, 50), percentile(o.own, 95))
        print(f"  {backend:8} without inbox {describe(o.bypassed)}")
        print(f"  {backend:8} with inbox    {describe(o.with_inbox)}")
        own_p50, own_p95 = found[backend]
        print(
            f"  {backend:8} added before the reply: p50 {own_p50:+.2f} ms  p95 {own_p95:+.2f} ms"
            f"  (the inbox's own steps; the turn times above differ by p50 "
            f"{percentile(o.with_inbox, 50) - percentile(o.bypassed, 50):+.2f} ms, p95 {added:+.2f} ms)"
        )
        print(f"  {backend:8} 'done' commit after Telegram accepted it: {describe(o.done)}")
        print(f"  {backend:8} for scale, one bare durable commit:  {describe(commit)}", flush=True)
    return found
