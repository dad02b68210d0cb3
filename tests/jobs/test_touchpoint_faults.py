"""A follow-up with two worker processes and a kill -9 mid-send: one model call, one message."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import system_now
from bench.fakes.anthropic_api import FakeAnthropic, Reply
from bench.fakes.telegram_api import FakeTelegram
from db.models import ConversationThread, Touchpoint, User
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository

pytestmark = [pytest.mark.slow, pytest.mark.both_databases, pytest.mark.process]

TOKEN = "123:ABC"
CHAT = 4242
# Long enough that a loaded machine never lets a live worker's lease run out while it works (the two
# workers race for the row, and only the lease keeps the loser off it); the dead worker's lease is
# then run out by `lease_runs_out`, not waited for.
LEASE_SECONDS = 60


class Composer:
    """Counts composition calls; always sends."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.calls += 1
        return Reply.tool_call(body["tools"][0]["name"], {"send": True, "text": "How did the interview go?"})


@pytest.fixture
def composer() -> Iterator[tuple[FakeAnthropic, Composer]]:
    behaviour = Composer()
    with FakeAnthropic(responder=behaviour) as server:
        yield server, behaviour


def _daytime_zone(now: datetime) -> str:
    """A fixed-offset zone where it is early afternoon now (the processes use the real clock)."""
    offset = (14 - now.hour + 12) % 24 - 12  # -12..+11 hours from UTC
    return f"Etc/GMT{-offset:+d}" if offset else "UTC"


def _worker(
    database_url: str, tg: FakeTelegram, model_url: str, cwd: Path, **extra: str
) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "MODEL": "anthropic:claude-haiku-4-5",
        "SUMMARY_MODEL": "test",
        "ANTHROPIC_API_KEY": "sk-fake",
        "ANTHROPIC_BASE_URL": model_url,
        "TELEGRAM_BOT_TOKEN": TOKEN,
        "TELEGRAM_API_BASE_URL": tg.base_url,
        "GRAPH_BACKEND": "none",
        "EMBEDDER": "none",
        "LOG_LEVEL": "WARNING",
        "TOUCHPOINT_LEASE_SECONDS": str(LEASE_SECONDS),
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "jobs", "run", "touchpoints"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def lease_runs_out(sessions: async_sessionmaker[AsyncSession]) -> None:
    """The dead worker's lease, as the passing of LEASE_SECONDS leaves it: expired (a second ago)."""
    async with sessions() as session, session.begin():
        expired = (
            await session.execute(
                update(Touchpoint)
                .where(Touchpoint.lease_holder.is_not(None), Touchpoint.lease_expires_at > system_now())
                .values(lease_expires_at=system_now() - timedelta(seconds=1))
                .returning(Touchpoint.id)
            )
        ).all()
    assert len(expired) == 1  # the killed worker held the one row, and held it still


async def test_two_instances_and_a_kill_9_mid_send_deliver_once(
    database_url: str,
    sessions: async_sessionmaker[AsyncSession],
    composer: tuple[FakeAnthropic, Composer],
    tmp_path: Path,
) -> None:
    server, behaviour = composer
    now = system_now()
    user, _ = await get_or_create_user(
        sessions, key=f"telegram:{CHAT}", now=now, timezone=_daytime_zone(now), name="Ana", telegram_id=CHAT
    )
    async with sessions() as session, session.begin():
        row = await session.get(User, user.id)
        assert row is not None
        row.last_message_at = now - timedelta(hours=3)
        thread = ConversationThread(
            user_id=user.id, type="follow_up", content="the interview", dedupe_key="t", created_at=now
        )
        session.add(thread)
        await session.flush()
        plan = NewTouchpoint("t", "the interview", now - timedelta(minutes=1), "k")
        await TouchpointRepository(session).plan(
            user.id, None, row.timezone, [plan], at=now - timedelta(hours=2)
        )

    with FakeTelegram(token=TOKEN) as tg:
        tg.hold_sends()
        first, second = (_worker(database_url, tg, server.base_url, tmp_path) for _ in range(2))
        try:
            held = await asyncio.to_thread(tg.send_held.wait, 90)
            assert held, (first.stderr.read() if first.stderr else "") + (
                second.stderr.read() if second.stderr else ""
            )
            # One of them leased the row, composed it, recorded it and is sending it now: kill -9 it.
            for process in (first, second):
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                process.wait(30)
            tg.release_sends(dropped=True)
            assert behaviour.calls == 1
            await lease_runs_out(sessions)

            rerun = _worker(database_url, tg, server.base_url, tmp_path)
            out, err = await asyncio.to_thread(rerun.communicate, timeout=120)
            assert rerun.returncode == 0, err
            assert '"sent": 1' in out
        finally:
            for process in (first, second):
                if process.poll() is None:
                    process.kill()
        sent = tg.messages_to(CHAT)

    assert [m.text for m in sent] == ["How did the interview go?"]
    assert behaviour.calls == 1  # resumed from the recorded text: no second model call
    async with sessions() as session:
        rows = (
            await session.execute(select(Touchpoint.status, Touchpoint.chunks_sent, Touchpoint.attempts))
        ).all()
    assert [tuple(r) for r in rows] == [("sent", 1, 2)]  # leased twice: the killed worker, the rerun
