"""The pace into a group chat, through the fake Bot API: at most 20 new messages a minute into
one group, in order, waiting rather than dropping; a private chat is never slowed; a 429 still
reaches the caller with Telegram's retry_after."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from telegram.error import RetryAfter
from telegram.ext import ExtBot

from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.sending import PACE_WINDOW, GroupPace
from tests.bot.conftest import TOKEN

GROUP, OTHER_GROUP, PRIVATE = -100555, -100777, 4242


class FakeTime:
    """A monotonic clock the pace's waits move forward, so a minute passes in no time."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.waits: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


def paced_bot(tg: FakeTelegram, clock: FakeTime, per_minute: int = 20) -> ExtBot[None]:
    pace = GroupPace(per_minute, clock=clock, sleep=clock.sleep)
    return ExtBot(TOKEN, base_url=tg.base_url, rate_limiter=pace)


async def test_twenty_a_minute_into_one_group_while_a_private_chat_is_not_slowed(tg: FakeTelegram) -> None:
    clock = FakeTime()
    sent_at: dict[int, list[float]] = {GROUP: [], OTHER_GROUP: [], PRIVATE: []}

    async def send(bot: ExtBot[None], chat_id: int, texts: list[str]) -> None:
        # One chat's answers go out one after another (the inbox works a chat's updates in order).
        for text in texts:
            await bot.send_message(chat_id=chat_id, text=text)
            sent_at[chat_id].append(clock.now)

    async with paced_bot(tg, clock) as bot:
        # 45 answers for one group, 20 for another and 5 private ones, side by side.
        await asyncio.gather(
            send(bot, GROUP, [f"g{i}" for i in range(45)]),
            send(bot, OTHER_GROUP, [f"o{i}" for i in range(20)]),
            send(bot, PRIVATE, [f"p{i}" for i in range(5)]),
        )
        await bot.send_chat_action(chat_id=GROUP, action="typing")  # not a message: never paced
    # Nothing dropped, in order.
    assert [m.text for m in tg.messages_to(GROUP)] == [f"g{i}" for i in range(45)]
    assert len(tg.messages_to(OTHER_GROUP)) == 20 and len(tg.messages_to(PRIVATE)) == 5
    # Never more than 20 in any window of 60 seconds, and the third minute started on time.
    times = sent_at[GROUP]
    assert all(times[i + 20] - times[i] >= PACE_WINDOW for i in range(len(times) - 20))
    assert times[-1] - times[0] == pytest.approx(2 * PACE_WINDOW)
    # The only waits are the two the busy group needs for its 45: the other group (its 20 fit one
    # minute) and the private chat never waited. (The shared clock jumps when the busy group waits,
    # so the times the others' sends finished at say nothing about whether they waited.)
    assert clock.waits == [pytest.approx(PACE_WINDOW), pytest.approx(PACE_WINDOW)]


async def test_a_429_still_reaches_the_caller_with_its_retry_after(tg: FakeTelegram) -> None:
    clock = FakeTime()
    tg.fail_next("sendMessage", error_code=429, description="Too Many Requests: retry after 7", retry_after=7)
    async with paced_bot(tg, clock) as bot:
        with pytest.raises(RetryAfter) as refused:
            await bot.send_message(chat_id=GROUP, text="first")
        await bot.send_message(chat_id=GROUP, text="again")
    retry: Any = refused.value.retry_after
    assert getattr(retry, "total_seconds", lambda: retry)() == 7
    assert [m.text for m in tg.messages_to(GROUP)] == ["again"] and clock.waits == []


async def test_a_pace_of_zero_paces_nothing(tg: FakeTelegram) -> None:
    clock = FakeTime()
    async with paced_bot(tg, clock, per_minute=0) as bot:
        await asyncio.gather(*(bot.send_message(chat_id=GROUP, text=str(i)) for i in range(25)))
    assert len(tg.messages_to(GROUP)) == 25 and clock.waits == []
