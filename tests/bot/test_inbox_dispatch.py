"""Working the inbox: resumed after a stop, drained on a stop, retried through database faults, fair."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.users import get_or_create_user
from agent.core.clock import Clock
from agent.core.errors import LeaseLostError
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.failures import ERROR_REPLY
from bot.delivery.worked_row import WorkedRow
from bot.handlers.commands import FORGOTTEN
from bot.web.app import WEBHOOK_PATH
from db.engine import create_engine
from db.inbox import InboxRepository, LeasedUpdate, NewUpdate
from db.models import InboxUpdate
from tests.bot.conftest import TOKEN, Brain
from tests.bot.delivery_helpers import (
    WEBHOOK_HEADERS,
    eventually,
    inbox_rows,
    running_bot,
    transcript,
    webhook_client,
    webhook_settings,
)

# Messages one user forwards at once: a third of them answered would already be a hold-up.
BURST = 30


async def store(sessions: async_sessionmaker[AsyncSession], update: dict[str, Any], **values: Any) -> None:
    """Put an update in the inbox as a process that stopped would have left it."""
    chat = update["message"]["chat"]["id"]
    async with sessions() as session, session.begin():
        repo = InboxRepository(session)
        await repo.add([NewUpdate(update["update_id"], chat, chat, update)], now=datetime.now(UTC))
        if values:
            from db.models import InboxUpdate

            row = (await session.execute(text("SELECT id FROM inbox_updates"))).scalar_one()
            stored = await session.get(InboxUpdate, row)
            assert stored is not None
            for name, value in values.items():
                setattr(stored, name, value)


@pytest.mark.both_databases
async def test_a_reply_recorded_but_not_sent_is_sent_once_without_a_new_turn(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, sessions: Any, brain: Brain
) -> None:
    update = tg.user_message(5, "asked before the crash")
    # The update is still in Telegram's queue too: polling brings it again, a repeat the inbox ignores.
    await store(
        sessions, update, status="replying", reply_text="answered before the crash", lease_holder="dead"
    )
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["answered before the crash"]
        await eventually(lambda: tg.pending_updates == 0)

        # Telegram holds the message a moment before the row's done mark commits.
        async def marked_done() -> bool:
            return [r.status for r in await inbox_rows(runtime.sessions)] == ["done"]

        await eventually(marked_done)
        rows = await inbox_rows(runtime.sessions)
    assert [(r.status, r.outcome, r.resumed_sends, r.payload) for r in rows] == [
        ("done", "answered", 1, None)
    ]
    assert brain.chat_calls == [] and len(tg.messages_to(5)) == 1


@pytest.mark.both_databases
async def test_an_answer_stored_but_never_sent_is_sent_once_without_a_new_turn(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, sessions: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False)
    update = tg.user_message(5, "asked before the crash")
    message = update["message"]
    user, _ = await get_or_create_user(
        sessions, key="telegram:5", now=datetime.now(UTC), timezone="UTC", telegram_id=5
    )
    turns = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(brain))
    said = datetime.fromtimestamp(message["date"], UTC)
    first = await turns.reply(
        Incoming(owner=user.id, text=message["text"], sent_at=said, telegram_message_id=message["message_id"])
    )
    await turns.close()
    # Its turn committed the answer, then the process died before Telegram had the first chunk.
    await store(sessions, update, lease_holder="dead")
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == [first.text]

        async def marked_done() -> bool:
            return [r.status for r in await inbox_rows(runtime.sessions)] == ["done"]

        await eventually(marked_done)
        rows = await inbox_rows(runtime.sessions)
        assert await transcript(runtime.sessions) == [("user", message["text"]), ("assistant", first.text)]
    # Sent from the stored answer (no second model call), counted as a resumed send: the first
    # chunk's window may have been hit.
    assert [(r.status, r.outcome, r.resumed_sends) for r in rows] == [("done", "answered", 1)]
    assert brain.chat_calls == [message["text"]] and len(tg.messages_to(5)) == 1


@pytest.mark.both_databases
async def test_a_turn_cut_off_by_a_stop_is_resumed_and_answered_once(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False)
    brain.delay = 30
    async with running_bot(settings, brain) as (runtime, _, runner):
        tg.user_message(5, "a slow question")
        await eventually(lambda: brain.in_flight == 1)
        await runner.stop(grace_seconds=0.2)  # the grace runs out: the turn is cancelled
        # Stored, not answered, and left for the next start with its lease released.
        assert await transcript(runtime.sessions) == [("user", "a slow question")]
        assert [(r.status, r.lease_holder) for r in await inbox_rows(runtime.sessions)] == [("pending", None)]
    brain.delay = 0
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: a slow question"]
        await eventually(lambda: tg.pending_updates == 0)
        assert await transcript(runtime.sessions) == [
            ("user", "a slow question"),
            ("assistant", "echo: a slow question"),
        ]


@pytest.mark.both_databases
async def test_a_stop_lets_a_turn_in_flight_finish_within_the_grace(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    brain.delay = 0.5
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, runner):
        tg.user_message(5, "finish me")
        await eventually(lambda: brain.in_flight == 1)
        await runner.stop(grace_seconds=10)
        assert [m.text for m in tg.messages_to(5)] == ["echo: finish me"]
        assert [r.status for r in await inbox_rows(runtime.sessions)] == ["done"]


@pytest.mark.both_databases
async def test_a_row_started_too_often_is_given_up_with_an_apology(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, sessions: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, inbox_max_attempts=3)
    update = tg.user_message(5, "crashes the process every time")
    await store(sessions, update, attempts=3)
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == [ERROR_REPLY]
        await eventually(lambda: tg.pending_updates == 0)
    rows = await inbox_rows(runtime.sessions)
    assert [(r.status, r.outcome) for r in rows] == [("done", "dead")]
    assert rows[0].last_error == "given up after 3 attempts"
    assert brain.chat_calls == []


async def test_a_burst_from_one_user_does_not_hold_up_another(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, rate_limit_per_minute=1000, rate_limit_per_day=1000)
    brain.delay = 0.01
    async with running_bot(settings, brain):
        for n in range(BURST):
            tg.user_message(1, f"forwarded {n}")
        await eventually(lambda: len(tg.messages_to(1)) >= 3)
        tg.user_message(2, "just me")
        await tg.wait_for_messages(1, chat_id=2)
        burst_done = len(tg.messages_to(1))
        await tg.wait_for_messages(BURST, chat_id=1, timeout=120)
    # The other user was answered while most of the burst still waited (one worker slot for it).
    assert burst_done < BURST // 3, burst_done
    assert [m.text for m in tg.messages_to(1)] == [f"echo: forwarded {n}" for n in range(BURST)]


@pytest.mark.both_databases
async def test_forget_removes_the_users_inbox_rows(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, _):
        tg.user_message(5, "my secret")
        tg.command(5, "/help")
        await tg.wait_for_messages(2, chat_id=5)
        tg.command(5, "/forget confirm")
        assert (await tg.wait_for_messages(3, chat_id=5))[-1].text == FORGOTTEN
        await eventually(lambda: tg.pending_updates == 0)
        await asyncio.sleep(0.2)
        assert await inbox_rows(runtime.sessions) == []


@pytest.mark.both_databases
async def test_tasks_inbox_drains_for_an_external_scheduler(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, sessions: Any, brain: Brain
) -> None:
    settings = webhook_settings(settings_factory, inbox_poll_seconds=600)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        # Stored by another instance: this one hears of it only by its poll, or by the scheduler.
        await asyncio.sleep(0.3)
        await store(sessions, tg.user_message(5, "stored elsewhere"))
        assert (await http.post("/tasks/inbox")).status_code == 403
        response = await http.post("/tasks/inbox", headers={"Authorization": "Bearer t0ken"})
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["emptied"] and result["worked"] == 1 and result["rows"] == {"done": 1}
        assert [m.text for m in tg.messages_to(5)] == ["echo: stored elsewhere"]


@pytest.mark.both_databases
async def test_the_webhook_can_answer_inside_the_request(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = webhook_settings(settings_factory, inbox_webhook_wait_seconds=20)
    brain.delay = 0.3
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "answer while I wait")
        assert (await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)).status_code == 200
        # The reply went out before Telegram got its 200.
        assert [m.text for m in tg.messages_to(5)] == ["echo: answer while I wait"]


@pytest.mark.both_databases
async def test_connections_terminated_mid_turn_are_retried_not_apologised_for(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, database_url: str, brain: Brain
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("pg_terminate_backend is PostgreSQL's")
    brain.delay = 1.0
    admin = create_engine(database_url, pool_size=1)
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, _):
        tg.user_message(5, "during the outage")
        await eventually(lambda: brain.in_flight == 1)
        async with admin.connect() as conn:
            # Every other connection to this test's own database: the bot's pools and its turn lock.
            killed = await conn.scalar(
                text(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                )
            )
        assert killed and killed >= 1
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: during the outage"]
        tg.user_message(5, "and after")
        assert [m.text for m in await tg.wait_for_messages(2, chat_id=5)][1] == "echo: and after"
        assert await transcript(runtime.sessions) == [
            ("user", "during the outage"),
            ("assistant", "echo: during the outage"),
            ("user", "and after"),
            ("assistant", "echo: and after"),
        ]
    await admin.dispose()


@pytest.mark.both_databases
async def test_a_row_whose_lease_ran_out_while_worked_here_is_not_worked_twice(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    brain.delay = 2.0
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, runner):
        tg.user_message(5, "slow one")
        await eventually(lambda: brain.in_flight == 1)
        async with runtime.sessions() as session, session.begin():
            # A renewal that came too late: the lease is over while the turn still runs.
            await session.execute(text("UPDATE inbox_updates SET lease_expires_at = received_at"))
        claims = runner.dispatcher.worked
        await eventually(lambda: brain.in_flight == 0)
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: slow one"]
        await asyncio.sleep(0.5)
        assert brain.chat_calls == ["slow one"] and len(tg.messages_to(5)) == 1
        assert runner.dispatcher.worked == claims + 1


@pytest.mark.both_databases
async def test_a_worker_whose_lease_ran_out_while_it_answered_sends_nothing(
    tg: FakeTelegram, sessions: Any
) -> None:
    message = tg.user_message(5, "asked while the worker stalled")
    await store(sessions, message, lease_holder="stalled")
    [row] = await inbox_rows(sessions)
    leased = LeasedUpdate(row.id, row.update_id, 5, 5, message, "pending", None, 0, 0)
    clock = Clock()
    stalled = WorkedRow(leased, "stalled", sessions, clock, held_until=clock.now() + timedelta(minutes=1))
    async with sessions() as session, session.begin():
        # Its lease ran out unrenewed and another instance took the row (which sends the stored answer).
        await session.execute(update(InboxUpdate).values(lease_holder="other"))
    stalled.held_until = clock.now() - timedelta(seconds=1)
    stalled.answer("the stored answer")
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        with pytest.raises(LeaseLostError):
            await stalled.finish(bot)
    assert tg.messages_to(5) == []
    [after] = await inbox_rows(sessions)
    assert (after.status, after.lease_holder, after.reply_text, after.resumed_sends) == (
        "pending",
        "other",
        None,
        0,
    )

    # Within the time its lease surely runs, a worker sends without asking the database first.
    async with sessions() as session, session.begin():
        await session.execute(update(InboxUpdate).values(lease_holder="stalled"))
    holder = WorkedRow(leased, "stalled", sessions, clock, held_until=clock.now() + timedelta(minutes=1))
    holder.answer("the stored answer")
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        await holder.finish(bot)
    assert [m.text for m in tg.messages_to(5)] == ["the stored answer"]
    [done] = await inbox_rows(sessions)
    assert (done.status, done.outcome, done.reply_chunks_sent) == ("done", "answered", 1)


@pytest.mark.both_databases
async def test_a_send_that_outlasts_its_rows_release_on_a_stop_is_recorded(
    tg: FakeTelegram, sessions: Any
) -> None:
    message = tg.user_message(5, "asked just before a stop")
    await store(sessions, message, lease_holder="stopping")
    [row] = await inbox_rows(sessions)
    clock = Clock()
    leased = LeasedUpdate(row.id, row.update_id, 5, 5, message, "pending", None, 0, 0)
    worker = WorkedRow(leased, "stopping", sessions, clock, held_until=clock.now() + timedelta(minutes=1))
    worker.answer("the answer")
    # A stop cancelled the work and released the row while the (shielded) send was in flight.
    async with sessions() as session, session.begin():
        await session.execute(update(InboxUpdate).values(lease_holder=None, lease_expires_at=None))
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        await worker.finish(bot)
    # What Telegram accepted is recorded: the next process finds the row done and sends nothing again.
    [done] = await inbox_rows(sessions)
    assert (done.status, done.outcome, done.reply_chunks_sent, done.resumed_sends) == (
        "done",
        "answered",
        1,
        0,
    )
    assert [m.text for m in tg.messages_to(5)] == ["the answer"]
