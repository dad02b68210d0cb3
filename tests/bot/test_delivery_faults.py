"""Fault tests with real bot processes: every message a user sends is stored once and answered once.

`python -m bot run` processes serve a crowd of users through the fake Bot API (which forgets
confirmed updates and retries webhook deliveries like Telegram) with a fake model that takes a
while, and a fault strikes mid-traffic. Counted afterwards, as a user would: messages never stored,
never answered, answered twice, stored twice. A kill -9 may land in the one window the design
leaves (Telegram accepted a reply, the "sent" mark not yet committed): such a reply is sent again,
and only a row resumed with a recorded reply (`resumed_sends`) may account for a second answer.
"""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.common import scratch_database
from bench.delivery import Scenario, run_scenario
from bench.delivery_harness import BotProcess, Tally, echo
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.balancer import Balancer
from bench.fakes.telegram_api import FakeTelegram
from bench.pg_cluster import ClusterUnavailableError, PrivateCluster
from tests.conftest import IN_CI, migrated_sqlite_url, postgres_database

pytestmark = [pytest.mark.slow, pytest.mark.process]

USERS, MESSAGES = 8, 6
# Shorter than Cloud Run's 10 s: a SIGTERM'd process must be gone within it.
GRACE = "8"


@pytest.fixture(scope="module")
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(responder=echo, delay=0.1) as fake:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token="123:ABC") as fake:
        yield fake


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A database of its own at the newest revision, a copy of the worker's migrated one (the bot
    processes check the revision at start, as in production)."""
    if request.param == "sqlite":
        yield migrated_sqlite_url(request.getfixturevalue("migrated_sqlite"), tmp_path / "bot.db")
        return
    template = request.getfixturevalue("migrated_postgres")
    if template is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    with postgres_database("nikita_faults", template) as url:
        yield url


async def run(
    scenario: Scenario, telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, url: str, **extra: Any
) -> tuple[Tally, list[BotProcess]]:
    result, bots = await run_scenario(
        scenario,
        tg=telegram,
        model_url=model.base_url,
        folder=tmp_path,
        database_url=url,
        users=USERS,
        messages=MESSAGES,
        balancer=Balancer,
        SHUTDOWN_GRACE_SECONDS=GRACE,
        **extra,
    )
    print(f"{scenario.name} {scenario.mode} {url.split(':')[0]}: {result.exactly_once()} {result}")
    return result, bots


def assert_exactly_once(result: Tally, bots: list[BotProcess], *, crashed: bool) -> None:
    logs = "\n".join(bot.log_tail() for bot in bots)
    assert result.sent == USERS * MESSAGES
    assert (result.lost, result.unanswered, result.stored_twice) == (0, 0, 0), (result, logs)
    assert result.out_of_order == 0, (result, logs)  # each user's messages stored and answered in order
    if crashed:
        # Only the crash window can repeat an answer, and only for a row resumed with its reply.
        assert result.answered_twice <= result.resumed_sends, (result, logs)
    else:
        assert result.answered_twice == 0, (result, logs)


# Each fault runs on both databases and both transports, not on every pairing of them: the database
# decides what a crash leaves stored, the transport how Telegram hands the update over again.
@pytest.mark.parametrize(
    ("database", "mode"), [("sqlite", "polling"), ("postgres", "webhook")], indirect=["database"]
)
async def test_kill_9_under_load(
    mode: str, telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, database: str
) -> None:
    result, bots = await run(Scenario("kill -9", "any", mode, ("kill",)), telegram, model, tmp_path, database)
    assert bots[0].exits[0][0] == -signal.SIGKILL
    assert_exactly_once(result, bots, crashed=True)


@pytest.mark.parametrize(
    ("database", "mode"), [("sqlite", "webhook"), ("postgres", "polling")], indirect=["database"]
)
async def test_sigterm_under_load_drains_within_the_grace(
    mode: str, telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, database: str
) -> None:
    result, bots = await run(
        Scenario("SIGTERM", "any", mode, ("sigterm",)), telegram, model, tmp_path, database
    )
    code, seconds = bots[0].exits[0]
    assert code == 0 and seconds < 10, (code, seconds, bots[0].log_tail())
    assert_exactly_once(result, bots, crashed=False)


# pg_terminate_backend is PostgreSQL's.
@pytest.mark.parametrize("database", ["postgres"], indirect=True)
async def test_connections_terminated_mid_turn(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, database: str
) -> None:
    scenario = Scenario("connections dropped", "postgres", "polling", ("drop", "drop"))
    result, bots = await run(scenario, telegram, model, tmp_path, database)
    assert_exactly_once(result, bots, crashed=False)


async def test_server_restart_of_a_private_cluster(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path
) -> None:
    try:
        cluster = PrivateCluster().start()
    except ClusterUnavailableError as exc:
        if IN_CI:
            raise
        pytest.skip(f"no private PostgreSQL server here: {exc}")
    try:
        async with scratch_database("postgres", cluster.url("postgres")) as url:
            assert url is not None
            scenario = Scenario("server restart", "private", "polling", ("restart",))
            result, bots = await run_scenario(
                scenario,
                tg=telegram,
                model_url=model.base_url,
                folder=tmp_path,
                database_url=url,
                cluster=cluster,
                users=USERS,
                messages=MESSAGES,
            )
    finally:
        cluster.stop()
    print(f"server restart: {result}")
    assert_exactly_once(result, bots, crashed=False)


# Several instances share one PostgreSQL.
@pytest.mark.parametrize("database", ["postgres"], indirect=True)
async def test_two_instances_one_killed(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, database: str
) -> None:
    scenario = Scenario("2 instances, 1 killed", "postgres", "webhook", ("kill-one",), instances=2)
    result, bots = await run(scenario, telegram, model, tmp_path, database)
    assert not bots[0].alive and bots[1].exits[-1][0] == 0
    assert_exactly_once(result, bots, crashed=True)
