"""Reminders through the bot: set in chat (the Anthropic SDK against the fake API), sent by the job,
done and snooze buttons, /reminders and its cancel buttons, cancel by chat, /timezone, /stats,
/export and /forget. Real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import json
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from sqlalchemy import select

from agent.account.users import get_or_create_user
from agent.core.clock import system_now
from agent.core.settings import Settings
from agent.history.turn_notes import is_note
from bench.clock import FrozenClock
from bench.fakes.anthropic_api import FakeAnthropic, Reply
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import Runtime, build_runtime
from db.models import Reminder, Touchpoint, TranscriptMessage
from jobs.registry import run_job
from tests.bot.conftest import ADMIN
from tests.privacy import rows_of

pytestmark = pytest.mark.both_databases

ANA = 78
ZONE = "Europe/Lisbon"


def _text_of(content: Any) -> str:
    """A message's text as the person or the bot wrote it (the turn's note left out)."""
    if isinstance(content, str):
        return content
    return "".join(
        block.get("text", "")
        for block in content
        if isinstance(block, dict) and not is_note(block.get("text", ""))
    )


@dataclass
class Chat:
    """The fake Anthropic API's chat model: a tool call for the words it knows, then the tool's answer."""

    calls: dict[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    bodies: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, body: dict[str, Any]) -> Reply:
        with self.lock:
            self.bodies.append(body)
        content = body["messages"][-1]["content"]
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        results = [b for b in blocks if b.get("type") == "tool_result"]
        if results:
            answer = json.loads(_text_of(results[-1]["content"]))
            if "reminders" in answer:  # asked to cancel: the one it found
                return Reply.tool_call(
                    "reminder_cancel", {"reminder_id": answer["reminders"][0]["reminder_id"]}
                )
            return Reply.text(f"Done: {json.dumps(answer)}")
        said = _text_of(blocks)
        for words, (tool, args) in self.calls.items():
            if words in said:
                return Reply.tool_call(tool, args)
        return Reply.text("You're welcome!")


@pytest.fixture
def chat() -> Iterator[tuple[FakeAnthropic, Chat]]:
    behaviour = Chat()
    with FakeAnthropic(responder=behaviour) as server:
        yield server, behaviour


@pytest.fixture
async def bot(
    settings_factory: Callable[..., Settings], engine: Any, chat: tuple[FakeAnthropic, Chat]
) -> AsyncIterator[Runtime]:
    server, _ = chat
    model = AnthropicModel(
        "claude-sonnet-4-6", provider=AnthropicProvider(api_key="sk-fake", base_url=server.base_url)
    )
    runtime = await build_runtime(
        settings_factory(),
        clock=FrozenClock(system_now()),
        model=model,
        migrate=False,
        summary_model=TestModel(),
    )
    application = build_application(runtime, webhook=False)
    try:
        with override_allow_model_requests(True):
            async with running(application, poll_timeout=1):
                yield runtime
    finally:
        await runtime.close()


async def _ana(runtime: Runtime) -> int:
    user, _ = await get_or_create_user(
        runtime.sessions,
        key=f"telegram:{ANA}",
        now=runtime.clock.now(),
        timezone=ZONE,
        name="Ana",
        telegram_id=ANA,
    )
    return user.id


def _press(tg: FakeTelegram, data: str, message_id: int, *, presser: int = ANA) -> None:
    tg.push_update(
        {
            "callback_query": {
                "id": f"cb-{data}-{presser}",
                "from": {"id": presser, "is_bot": False, "first_name": "Ana"},
                "chat_instance": "1",
                "data": data,
                "message": {
                    "message_id": message_id,
                    "date": 0,
                    "chat": {"id": presser, "type": "private", "first_name": "Ana"},
                    "text": "⏰",
                },
            }
        }
    )


async def test_set_in_chat_it_arrives_at_its_local_minute_with_done_and_snooze(
    bot: Runtime, tg: FakeTelegram, chat: tuple[FakeAnthropic, Chat]
) -> None:
    _, model = chat
    user_id = await _ana(bot)
    local = (system_now().astimezone(ZoneInfo(ZONE)) + timedelta(minutes=3)).replace(second=0, microsecond=0)
    wanted = f"{local:%Y-%m-%d %H:%M}"
    model.calls["remind me"] = ("reminder_set", {"text": "call mom", "local_time": wanted})

    tg.user_message(ANA, "remind me in 3 minutes to call mom")
    (answer,) = await tg.wait_for_messages(1, chat_id=ANA)
    assert '"set": true' in answer.text and f"at {local:%H:%M} ({ZONE})" in answer.text
    async with bot.sessions() as session:
        reminder = await session.scalar(select(Reminder))
        asked = await session.scalar(select(TranscriptMessage.id).where(TranscriptMessage.role == "user"))
    assert reminder is not None and (reminder.user_id, reminder.source_message_id) == (user_id, asked)

    assert isinstance(bot.clock, FrozenClock)
    bot.clock.current = local.astimezone(ZoneInfo("UTC")) - timedelta(seconds=1)
    assert await run_job("touchpoints", bot.jobs) == {"due": 0}
    bot.clock.current += timedelta(seconds=20)
    assert await run_job("touchpoints", bot.jobs) == {"due": 1, "sent": 1}
    sent = (await tg.wait_for_messages(2, chat_id=ANA))[-1]
    assert sent.text == "⏰ call mom"
    markup = json.dumps(sent.params.get("reply_markup"))
    assert f"reminder:done:{reminder.id}" in markup and f"reminder:snooze:{reminder.id}:1h" in markup

    _press(tg, f"reminder:snooze:{reminder.id}:1h", sent.message_id, presser=ANA + 1)  # not hers: refused
    _press(tg, f"reminder:snooze:{reminder.id}:1h", sent.message_id)
    await tg.wait_for_calls("answerCallbackQuery", 2)
    async with bot.sessions() as session:
        due = await session.scalar(
            select(Touchpoint.due_at).where(
                Touchpoint.status == "planned", Touchpoint.reminder_id == reminder.id
            )
        )
    assert due == bot.clock.now() + timedelta(hours=1)
    _press(tg, f"reminder:done:{reminder.id}", sent.message_id)
    await tg.wait_for_calls("answerCallbackQuery", 3)
    bot.clock.advance(timedelta(hours=1))
    assert await run_job("touchpoints", bot.jobs) == {"due": 0}  # done: the snooze is gone

    # "thanks!" is read after the reminder, which is the assistant's turn in the history.
    tg.user_message(ANA, "thanks!")
    await tg.wait_for_messages(3, chat_id=ANA)
    history = [(m["role"], _text_of(m["content"])) for m in model.bodies[-1]["messages"]]
    assert ("assistant", "⏰ call mom") in history and history[-1] == ("user", "thanks!")


async def test_see_cancel_move_count_export_and_forget(
    bot: Runtime, tg: FakeTelegram, chat: tuple[FakeAnthropic, Chat]
) -> None:
    _, model = chat
    user_id = await _ana(bot)
    tomorrow = (system_now().astimezone(ZoneInfo(ZONE)) + timedelta(days=1)).date()
    for text, repeat in (("water the plants", "once"), ("pills", "daily")):
        model.calls[text] = (
            "reminder_set",
            {"text": text, "local_time": f"{tomorrow} 09:00", "repeat": repeat},
        )
        tg.user_message(ANA, f"remind me tomorrow at 9: {text}")
    await tg.wait_for_messages(2, chat_id=ANA)

    tg.command(ANA, "/timezone Asia/Tokyo")  # 09:00 stays 09:00, in Tokyo now
    await tg.wait_for_messages(3, chat_id=ANA)
    async with bot.sessions() as session:
        dues = (await session.execute(select(Touchpoint.due_at))).scalars().all()
    assert {d.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M") for d in dues} == {
        f"{tomorrow} 09:00"
    }

    tg.command(ANA, "/reminders")
    listing = (await tg.wait_for_messages(4, chat_id=ANA))[-1]
    assert "- water the plants:" in listing.text and "(every day)" in listing.text
    buttons = [row[0] for row in listing.params["reply_markup"]["inline_keyboard"]]
    assert [b["text"] for b in buttons] == ["Cancel: water the plants", "Cancel: pills"]
    _press(tg, buttons[0]["callback_data"], listing.message_id)
    assert (await tg.wait_for_messages(5, chat_id=ANA))[-1].text == "Cancelled: water the plants"

    model.calls["cancel the pill"] = ("reminder_list", {})
    tg.user_message(ANA, "cancel the pill reminder")
    assert '"cancelled": true' in (await tg.wait_for_messages(6, chat_id=ANA))[-1].text
    async with bot.sessions() as session:
        statuses = (await session.execute(select(Reminder.status))).scalars().all()
        open_occurrences = await session.scalar(select(Touchpoint.id).where(Touchpoint.status == "planned"))
    assert statuses == ["cancelled", "cancelled"] and open_occurrences is None

    tg.command(ADMIN, "/stats")
    stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert "reminders in the last 7 days: 2 set, 0 sent, 0 snoozed, 2 cancelled" in stats
    tg.command(ANA, "/export")
    document = json.loads((await tg.wait_for_documents(1))[-1].content)
    assert [(r["text"], r["status"]) for r in document["reminders"]] == [
        ("water the plants", "cancelled"),
        ("pills", "cancelled"),
    ]
    tg.command(ANA, "/forget confirm")
    assert (await tg.wait_for_messages(7, chat_id=ANA))[-1].text.startswith("Done.")
    assert (await rows_of(bot.sessions, user_id))["reminders"] == 0
