"""A daily reminder with two worker processes and a kill -9 mid-send: one message, the next one
planned once, no model call."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import system_now
from agent.reminders.schedule import parse_local
from agent.reminders.store import NewReminder, set_reminder
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.telegram_api import FakeTelegram
from db.models import Touchpoint
from tests.jobs.test_touchpoint_faults import TOKEN, Composer, _worker, lease_runs_out

pytestmark = [pytest.mark.slow, pytest.mark.both_databases, pytest.mark.process]

CHAT = 4343
ROOT = Path(__file__).resolve().parents[2]
# Far from UTC and at night there often: quiet hours are not a reminder's business.
ZONE = "Pacific/Kiritimati"


async def test_two_instances_and_a_kill_9_mid_send_deliver_a_reminder_once(
    database_url: str, sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    now = system_now()
    user, _ = await get_or_create_user(
        sessions, key=f"telegram:{CHAT}", now=now, timezone=ZONE, name="Ana", telegram_id=CHAT
    )
    # Set two minutes ago for the minute just gone: due now on the processes' real clock.
    local = (now - timedelta(minutes=1)).astimezone(ZoneInfo(ZONE))
    await set_reminder(
        sessions,
        user.id,
        NewReminder("take the pills", parse_local(f"{local:%Y-%m-%d %H:%M}"), "daily"),
        timezone=ZONE,
        now=now - timedelta(minutes=2),
        source_message_id=None,
        max_active=50,
    )
    behaviour = Composer()
    with FakeAnthropic(responder=behaviour) as server, FakeTelegram(token=TOKEN) as tg:
        tg.hold_sends()
        workers = [
            _worker(database_url, tg, server.base_url, tmp_path, PYTHONPATH=str(ROOT)) for _ in range(2)
        ]
        try:
            held = await asyncio.to_thread(tg.send_held.wait, 90)
            assert held, "".join(w.stderr.read() for w in workers if w.stderr and w.poll() is not None)
            # One of them leased the occurrence, recorded it and is sending it now: kill -9 both.
            for process in workers:
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                process.wait(30)
            tg.release_sends(dropped=True)
            await lease_runs_out(sessions)

            rerun = _worker(database_url, tg, server.base_url, tmp_path, PYTHONPATH=str(ROOT))
            out, err = await asyncio.to_thread(rerun.communicate, timeout=120)
            assert rerun.returncode == 0, err
            assert '"sent": 1' in out
        finally:
            for process in workers:
                if process.poll() is None:
                    process.kill()
        sent = tg.messages_to(CHAT)

    assert [m.text for m in sent] == ["⏰ take the pills"]
    assert behaviour.calls == 0  # a reminder is never composed by a model
    async with sessions() as session:
        rows = (
            await session.execute(
                select(Touchpoint.status, Touchpoint.chunks_sent, Touchpoint.attempts).order_by(Touchpoint.id)
            )
        ).all()
    # Leased twice (the killed worker, the rerun); tomorrow's planned once, with the recording.
    assert [tuple(r) for r in rows] == [("sent", 1, 2), ("planned", 0, 0)]
