"""The send-then-edit preview in a group chat, through the real python-telegram-bot and fake Bot API.

This drives the preview directly, for its pace and its edits; tests/bot/test_groups.py sees a group
turn's preview through the handler.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from telegram import Bot, Message

from agent.core.clock import Clock
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.edit_stream import GROUP_INTERVAL, EditStream
from bot.delivery.streaming import preview
from bot.delivery.worked_row import WorkedRow
from db.inbox import LeasedUpdate
from tests.bot.conftest import TOKEN

GROUP = -100123


def group_message(bot: Bot) -> Message:
    data: dict[str, Any] = {
        "message_id": 7,
        "date": 1_700_000_000,
        "chat": {"id": GROUP, "type": "group", "title": "Friends"},
        "from": {"id": 42, "is_bot": False, "first_name": "Alice"},
        "text": "what's the plan?",
    }
    message = Message.de_json(data, bot)
    assert message is not None
    return message


def leased(engine: AsyncEngine) -> WorkedRow:
    row = LeasedUpdate(1, 1, 42, GROUP, None, "pending", None, 0, 0)
    return WorkedRow(row, "test", async_sessionmaker(engine), Clock())


async def test_a_group_preview_is_one_message_edited_every_three_seconds(
    settings_factory: Callable[..., Settings], engine: AsyncEngine, tg: FakeTelegram
) -> None:
    settings = settings_factory(stream_interval_seconds=0.1)
    delivery = leased(engine)
    first, *rest = ["Here is ", "**the plan**", ": first", ", then second"] * 2
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        async with preview(bot, group_message(bot), settings, delivery) as progress:
            assert isinstance(progress, EditStream)
            so_far = first
            await progress.text(so_far)
            await tg.wait_for_messages(1, chat_id=GROUP)
            for piece in rest:  # the rest of the answer comes well inside the three seconds
                so_far += piece
                await progress.text(so_far)
                await asyncio.sleep(0.1)
            await tg.wait_for_calls("editMessageText")
    [sent] = tg.messages_to(GROUP)
    assert delivery.preview_message_id == sent.message_id and sent.text == "Here is"
    assert tg.drafts == [] and tg.calls_to("sendMessageDraft") == []  # drafts are private-only
    assert len(tg.edits) >= 1
    times = [sent.at] + [e.at for e in tg.edits]
    assert all(later - earlier >= GROUP_INTERVAL for earlier, later in itertools.pairwise(times))
    texts = [sent.text] + [e.text for e in tg.edits]
    assert all(later.startswith(earlier) for earlier, later in itertools.pairwise(texts))
    assert tg.chat_view(GROUP) == [texts[-1]]


async def test_a_group_without_the_fallback_gets_no_preview(
    settings_factory: Callable[..., Settings], engine: AsyncEngine, tg: FakeTelegram
) -> None:
    settings = settings_factory(stream_edit_fallback=False)
    delivery = leased(engine)
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        async with preview(bot, group_message(bot), settings, delivery) as progress:
            assert progress is None
    assert delivery.preview_message_id is None and [c.method for c in tg.calls] == ["getMe"]
