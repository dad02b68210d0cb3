"""A message whose inbox row runs again after a crash is counted once: the person's rate limit, and
a stranger's once-a-day reply (sent at least once, and once a day).

The crash is a stop at a precise point: the process stops while Telegram holds the first chunk of
the answer (it never arrives: Telegram refuses it unrecorded), or while the model is still thinking.
The row is left pending with nothing recorded, as a kill -9 leaves it, and the next process runs it
again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.access import REFUSED, STRANGERS
from agent.account.ratelimit import STRANGER_REPLY
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.runner import DeliveryRunner
from db.models import DailyCount, RateLimitEvent
from tests.bot.conftest import Brain
from tests.bot.delivery_helpers import eventually, inbox_rows, running_bot, transcript

pytestmark = pytest.mark.both_databases

USER, STRANGER = 5, 66


async def stop_while_telegram_holds_the_answer(
    tg: FakeTelegram, runner: DeliveryRunner, sessions: Any
) -> None:
    """Stop the bot while its first chunk is with Telegram, which then never delivers it."""
    assert await asyncio.to_thread(tg.send_held.wait, 20)
    stopping = asyncio.create_task(runner.stop(grace_seconds=0))

    async def released() -> bool:
        return [(r.status, r.lease_holder) for r in await inbox_rows(sessions)] == [("pending", None)]

    await eventually(released)  # the row's work is cancelled and its lease given back
    tg.release_sends(dropped=True)
    await stopping


async def counted(sessions: async_sessionmaker[AsyncSession], scope: str) -> int:
    """Rate-limit rows of this scope (requests counted, or "<scope>!d" notes told)."""
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).where(RateLimitEvent.scope == scope)) or 0)


async def all_done(sessions: async_sessionmaker[AsyncSession]) -> bool:
    """Every inbox row is done."""
    return {r.status for r in await inbox_rows(sessions)} == {"done"}


async def test_a_row_resumed_after_its_answer_was_stored_sends_it_to_a_person_at_their_limit(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, rate_limit_per_minute=1)
    async with running_bot(settings, brain) as (runtime, _, runner):
        tg.hold_sends()
        tg.user_message(USER, "my one message this minute")
        await stop_while_telegram_holds_the_answer(tg, runner, runtime.sessions)
        answered = [("user", "my one message this minute"), ("assistant", "echo: my one message this minute")]
        assert await transcript(runtime.sessions) == answered
    assert tg.messages_to(USER) == []
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=USER)] == [
            "echo: my one message this minute"
        ]
        await eventually(lambda: all_done(runtime.sessions))
        rows = await inbox_rows(runtime.sessions)
        assert await counted(runtime.sessions, "message") == 1
        assert await transcript(runtime.sessions) == answered
    # The stored answer, once, without a second model call; no limit's note.
    assert brain.chat_calls == ["my one message this minute"] and len(tg.messages_to(USER)) == 1
    assert [(r.outcome, r.resumed_sends) for r in rows] == [("answered", 1)]


async def test_a_turn_cut_off_before_its_answer_is_answered_within_the_persons_limit(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, rate_limit_per_minute=1)
    brain.delay = 30
    async with running_bot(settings, brain) as (runtime, _, runner):
        tg.user_message(USER, "a slow question")
        await eventually(lambda: brain.in_flight == 1)
        await runner.stop(grace_seconds=0.2)  # the model still thinks: the turn is cancelled
        assert await transcript(runtime.sessions) == [("user", "a slow question")]
    brain.delay = 0
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=USER)] == ["echo: a slow question"]
        await eventually(lambda: all_done(runtime.sessions))
        assert await counted(runtime.sessions, "message") == 1
        # The next message is over the limit of one a minute: the message before counted once.
        tg.user_message(USER, "and another")
        assert (await tg.wait_for_messages(2, chat_id=USER))[-1].text.startswith("Whoa")
    assert len(tg.messages_to(USER)) == 2


async def test_a_strangers_reply_cut_off_by_a_crash_is_sent_on_resume_and_once_a_day(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(access="allowlist")
    async with running_bot(settings, brain) as (runtime, _, runner):
        tg.hold_sends()
        tg.user_message(STRANGER, "hello?")
        await stop_while_telegram_holds_the_answer(tg, runner, runtime.sessions)
    assert tg.messages_to(STRANGER) == []
    async with running_bot(settings, brain) as (runtime, _, _):
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=STRANGER)] == [STRANGER_REPLY]
        await eventually(lambda: all_done(runtime.sessions))
        tg.user_message(STRANGER, "anyone?")  # told already today: dropped quietly
        await eventually(lambda: tg.pending_updates == 0)
        await eventually(lambda: all_done(runtime.sessions))
        rows = await inbox_rows(runtime.sessions)
        async with runtime.sessions() as session:
            day = datetime.now(UTC).date()
            stmt = select(DailyCount.name, DailyCount.count).where(DailyCount.day == day)
            counts = {name: n for name, n in (await session.execute(stmt)).all()}
        told = await counted(runtime.sessions, "stranger!d")
    assert [m.text for m in tg.messages_to(STRANGER)] == [STRANGER_REPLY]
    assert [(r.outcome, r.resumed_sends) for r in rows] == [("answered", 1), ("refused", 0)]
    assert (counts.get(REFUSED), counts.get(STRANGERS), told) == (2, 1, 1)
    assert brain.chat_calls == []
