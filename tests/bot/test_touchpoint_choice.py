"""Follow-ups through the bot: /followups, the stop button, /memory, /stats, /export, /forget, and
the follow-up in the history of the user's answer. Real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import select

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram, SentMessage
from bot.app import build_application, running
from bot.delivery.touchpoints import FOLLOWUPS_OFF
from bot.handlers.touchpoints import TURNED_OFF, TURNED_ON
from bot.runtime import Runtime, build_runtime
from db.models import ConversationThread, Touchpoint, User
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from jobs.registry import run_job
from tests.bot.conftest import ADMIN
from tests.privacy import rows_of

pytestmark = pytest.mark.both_databases

ANA = 77
FOLLOW_UP = "Hey Ana, how did the interview go?"


@dataclass
class Model:
    """Writes the follow-up (typed output) and answers chat turns, keeping what each request held."""

    chat_requests: list[list[ModelMessage]] = field(default_factory=list)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if info.output_tools:
            return ModelResponse(
                parts=[ToolCallPart(info.output_tools[0].name, {"send": True, "text": FOLLOW_UP})]
            )
        self.chat_requests.append(list(messages))
        return ModelResponse(parts=[TextPart("So glad to hear it!")])


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
async def bot(settings_factory: Callable[..., Settings], engine: Any, model: Model) -> AsyncIterator[Runtime]:
    # No quiet hours: the bot runs on the wall clock.
    settings = settings_factory(touchpoint_quiet_start_hour=0, touchpoint_quiet_end_hour=0)
    runtime = await build_runtime(
        settings, model=FunctionModel(model), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=False)
    try:
        async with running(application, poll_timeout=1):
            yield runtime
    finally:
        await runtime.close()


async def _plan(runtime: Runtime, *, due_in: timedelta = timedelta(minutes=-1)) -> int:
    """Ana, onboarded, with a follow-up on her interview."""
    now = runtime.clock.now()
    user, _ = await get_or_create_user(
        runtime.sessions, key=f"telegram:{ANA}", now=now, timezone="UTC", name="Ana", telegram_id=ANA
    )
    async with runtime.sessions() as session, session.begin():
        row = await session.get(User, user.id)
        assert row is not None
        row.last_message_at = now - timedelta(hours=5)
        session.add(
            ConversationThread(
                user_id=user.id, type="follow_up", content="the interview", dedupe_key="t", created_at=now
            )
        )
        await session.flush()
        plan = NewTouchpoint("t", "Ana's interview on Thursday", now + due_in, "k")
        await TouchpointRepository(session).plan(user.id, None, "UTC", [plan], at=now - timedelta(hours=4))
    return user.id


async def _touchpoints(runtime: Runtime) -> list[tuple[str, str | None]]:
    async with runtime.sessions() as session:
        return [
            tuple(r) for r in (await session.execute(select(Touchpoint.status, Touchpoint.outcome))).all()
        ]


async def test_the_follow_up_is_in_the_history_of_the_answer(
    bot: Runtime, tg: FakeTelegram, model: Model
) -> None:
    await _plan(bot)
    assert await run_job("touchpoints", bot.jobs) == {"due": 1, "sent": 1}
    (sent,) = await tg.wait_for_messages(1, chat_id=ANA)
    assert sent.text == FOLLOW_UP and FOLLOWUPS_OFF in json.dumps(sent.params.get("reply_markup"))

    tg.user_message(ANA, "it went well, I got the job!")
    await tg.wait_for_messages(2, chat_id=ANA)
    (request,) = model.chat_requests
    said = [
        p.content for m in request if isinstance(m, ModelResponse) for p in m.parts if isinstance(p, TextPart)
    ]
    assert said == [FOLLOW_UP]  # the model reads its own follow-up before her answer
    assert isinstance(request[-1], ModelRequest)


async def test_followups_off_and_on_by_command(bot: Runtime, tg: FakeTelegram) -> None:
    user_id = await _plan(bot, due_in=timedelta(days=1))
    tg.command(ANA, "/followups")
    assert (await tg.wait_for_messages(1, chat_id=ANA))[-1].text.startswith("Follow-ups are on.")
    tg.command(ANA, "/followups off")
    assert (await tg.wait_for_messages(2, chat_id=ANA))[-1].text == TURNED_OFF
    assert await _touchpoints(bot) == [("cancelled", "opted_out")]
    tg.command(ANA, "/followups on")
    assert (await tg.wait_for_messages(3, chat_id=ANA))[-1].text == TURNED_ON
    async with bot.sessions() as session:
        user = await session.get(User, user_id)
        assert user is not None and user.followups is True


async def test_the_button_under_a_follow_up_stops_them(bot: Runtime, tg: FakeTelegram) -> None:
    user_id = await _plan(bot)
    await run_job("touchpoints", bot.jobs)
    (sent,) = await tg.wait_for_messages(1, chat_id=ANA)
    for press in ("cb1", "cb2"):  # a double tap: the second finds the button already gone
        _press_stop(tg, press, sent)
    assert [m.text for m in await tg.wait_for_messages(3, chat_id=ANA)][1:] == [TURNED_OFF, TURNED_OFF]
    assert len(tg.calls_to("answerCallbackQuery")) == 2 and tg.calls_to("editMessageReplyMarkup")
    async with bot.sessions() as session:
        user = await session.get(User, user_id)
        assert user is not None and user.followups is False


def _press_stop(tg: FakeTelegram, press: str, sent: SentMessage) -> None:
    tg.push_update(
        {
            "callback_query": {
                "id": press,
                "from": {"id": ANA, "is_bot": False, "first_name": "Ana"},
                "chat_instance": "1",
                "data": FOLLOWUPS_OFF,
                "message": {
                    "message_id": sent.message_id,
                    "date": 0,
                    "chat": {"id": ANA, "type": "private", "first_name": "Ana"},
                    "text": sent.text,
                },
            }
        }
    )


async def test_memory_stats_export_and_forget_show_and_remove_them(bot: Runtime, tg: FakeTelegram) -> None:
    user_id = await _plan(bot, due_in=timedelta(days=1))
    tg.command(ANA, "/memory")
    memory = (await tg.wait_for_messages(1, chat_id=ANA))[-1].text
    assert "I plan to come back to:\n- Ana's interview on Thursday" in memory

    tg.command(ADMIN, "/stats")
    stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert "touchpoints: 1 planned; in the last 7 days 0 sent (0 answered within 24 h), 0 declined" in stats

    tg.command(ANA, "/export")
    document = json.loads((await tg.wait_for_documents(1))[-1].content)
    assert [(f["reason"], f["status"]) for f in document["follow_ups"]] == [
        ("Ana's interview on Thursday", "planned")
    ]

    tg.command(ANA, "/forget confirm")
    assert (await tg.wait_for_messages(2, chat_id=ANA))[-1].text.startswith("Done.")
    assert (await rows_of(bot.sessions, user_id))["touchpoints"] == 0
