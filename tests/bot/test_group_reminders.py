"""A group's reminder and its buttons, through the real python-telegram-bot against the fake Bot API:
set in the group, it goes to the group, any member may snooze it or mark it done (a member with no
row of their own too), two presses at once snooze it once, and no press reaches across: from the
group not a member's private reminder, from a private chat not the group's."""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import select

from agent.core.clock import system_now
from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.telegram_groups import group_chat, person
from bot.app import build_application, running
from bot.handlers.reminders import GONE
from bot.runtime import Runtime, build_runtime
from db.models import Reminder, Touchpoint
from jobs.registry import run_job
from tests.bot.conftest import last_user_text

pytestmark = pytest.mark.both_databases

GROUP = -1005550001
ANA, BOB, CAT = 41, 42, 43
REMIND = re.compile(r"remind (?:us|me) at (\d{4}-\d\d-\d\d \d\d:\d\d) to (.+)$")
_press_ids = itertools.count(1)


def reminding(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Sets the reminder it is asked for, lists them when asked which, and reads out what a tool said."""
    last = messages[-1]
    if isinstance(last, ModelRequest):
        returned = [p for p in last.parts if isinstance(p, ToolReturnPart)]
        if returned:
            return ModelResponse(parts=[TextPart(json.dumps(returned[-1].content))])
    said = last_user_text(messages).splitlines()[-1]
    if m := REMIND.search(said):
        return ModelResponse(parts=[ToolCallPart("reminder_set", {"text": m[2], "local_time": m[1]})])
    if "which reminders" in said:
        return ModelResponse(parts=[ToolCallPart("reminder_list", {})])
    return ModelResponse(parts=[TextPart("ok")])


@pytest.fixture
async def bot(settings_factory: Callable[..., Settings], engine: Any) -> AsyncIterator[Runtime]:
    runtime = await build_runtime(
        settings_factory(onboarding_enabled=False),
        clock=FrozenClock(current=system_now()),
        model=FunctionModel(reminding),
        migrate=False,
        summary_model=TestModel(),
    )
    try:
        async with running(build_application(runtime, webhook=False), poll_timeout=1):
            yield runtime
    finally:
        await runtime.close()


def press(tg: FakeTelegram, presser: int, chat: dict[str, Any], message_id: int, data: str) -> str:
    """`presser` presses a button with `data` under a message of `chat`; the press's id."""
    press_id = f"press-{next(_press_ids)}"
    message = {"message_id": message_id, "date": int(time.time()), "chat": chat, "text": "⏰"}
    query = {"id": press_id, "from": person(presser, "Member"), "chat_instance": "1", "data": data}
    tg.push_update({"callback_query": {**query, "message": message}})
    return press_id


async def answers(tg: FakeTelegram, n: int) -> dict[str, tuple[str | None, bool | None]]:
    """(text, show_alert) of the first `n` press answers, by press id."""
    calls = (await tg.wait_for_calls("answerCallbackQuery", n))[:n]
    return {c.params["callback_query_id"]: (c.params.get("text"), c.params.get("show_alert")) for c in calls}


async def test_any_member_presses_a_groups_reminder_and_no_press_reaches_across(
    bot: Runtime, tg: FakeTelegram
) -> None:
    assert isinstance(bot.clock, FrozenClock)
    due = (bot.clock.now() + timedelta(minutes=10)).replace(second=0, microsecond=0)
    at = f"{due:%Y-%m-%d %H:%M}"  # the default time zone, UTC, for Ana and for the group
    tg.user_message(ANA, f"remind me at {at} to call mom", first_name="Ana")
    tg.mention(GROUP, CAT, f"remind us at {at} to bring the blanket", first_name="Cat", title="Picnic")
    await tg.wait_for_messages(1, chat_id=ANA)
    await tg.wait_for_messages(1, chat_id=GROUP)
    async with bot.sessions() as session:
        ids = dict((await session.execute(select(Reminder.text, Reminder.id))).all())
    mine, ours = ids["call mom"], ids["bring the blanket"]
    # Asked in the group, the bot lists the group's reminders only.
    tg.mention(GROUP, BOB, "which reminders are set?", first_name="Bob")
    listed = (await tg.wait_for_messages(2, chat_id=GROUP))[-1].text
    assert "bring the blanket" in listed and "call mom" not in listed

    bot.clock.current = due + timedelta(seconds=5)
    assert await run_job("touchpoints", bot.jobs) == {"due": 2, "sent": 2}
    sent = tg.messages_to(GROUP)[-1]
    assert sent.text == "⏰ bring the blanket"
    assert f"reminder:snooze:{ours}:10m" in json.dumps(sent.params["reply_markup"])
    in_group, in_private = group_chat(GROUP, "Picnic"), {"id": ANA, "type": "private", "first_name": "Ana"}

    # Bob, who never wrote to the bot, snoozes it; Cat's press a moment later snoozes it no further.
    bob = press(tg, BOB, in_group, sent.message_id, f"reminder:snooze:{ours}:10m")
    cat = press(tg, CAT, in_group, sent.message_id, f"reminder:snooze:{ours}:1h")
    # Forged presses: Ana's private reminder from the group, the group's from Ana's private chat.
    forged = [
        press(tg, BOB, in_group, sent.message_id, f"reminder:{action}:{mine}{choice}")
        for action, choice in (("done", ""), ("snooze", ":1h"), ("cancel", ""))
    ]
    forged.append(press(tg, ANA, in_private, 1, f"reminder:snooze:{ours}:1h"))
    forged.append(press(tg, ANA, in_private, 1, f"reminder:cancel:{ours}"))
    got = await answers(tg, 7)
    until = bot.clock.now() + timedelta(minutes=10)
    # The group keeps UTC; a snooze past midnight says so.
    later = "" if until.date() == bot.clock.now().date() else " tomorrow"
    snoozed = f"Snoozed until {until:%H:%M}{later}"
    assert got[bob] == got[cat] == (snoozed, None)
    assert [got[f] for f in forged] == [(GONE, None)] + [(GONE, True)] * 4
    # The buttons went after the first press; the second found them gone and said nothing of it.
    assert "reply_markup" not in tg.calls_to("editMessageReplyMarkup")[0].params
    assert tg.messages_to(GROUP)[-1] is sent and tg.messages_to(ANA)[-1].text == "⏰ call mom"

    # Ana marks the group's reminder done in the group: the snooze goes, her own reminder stays.
    done = press(tg, ANA, in_group, sent.message_id, f"reminder:done:{ours}")
    assert (await answers(tg, 8))[done] == ("Done ✓", None)
    bot.clock.advance(timedelta(hours=2))
    assert await run_job("touchpoints", bot.jobs) == {"due": 0}
    async with bot.sessions() as session:
        reminders = dict((await session.execute(select(Reminder.id, Reminder.status))).all())
        rows = await session.execute(select(Touchpoint.reminder_id, Touchpoint.status))
        occurrences = sorted((reminder, status) for reminder, status in rows)
    assert reminders == {mine: "done", ours: "done"}  # both one-offs that went out
    assert occurrences == sorted([(mine, "sent"), (ours, "sent"), (ours, "cancelled")])
