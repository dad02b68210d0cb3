"""/memory's "forget this" buttons, a page at a time: real python-telegram-bot against the fake Bot API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select

from agent.account.users import get_or_create_user
from bench.fakes.telegram_api import FakeTelegram
from bot.app import AnyApplication
from bot.handlers.memory_facts import PAGE_SIZE
from bot.runtime import Runtime
from db.models import UserFact
from db.repositories.facts import FactRepository

pytestmark = pytest.mark.both_databases

ANA, BO = 81, 82


def _press(tg: FakeTelegram, data: str, message_id: int, presser: int) -> None:
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
                    "text": "memory",
                },
            }
        }
    )


async def test_forget_one_fact_from_memory_and_turn_the_pages(
    runtime: Runtime, app: AnyApplication, tg: FakeTelegram
) -> None:
    now = runtime.clock.now()
    users = {}
    for telegram_id, name in ((ANA, "Ana"), (BO, "Bo")):
        user, _ = await get_or_create_user(
            runtime.sessions,
            key=f"telegram:{telegram_id}",
            now=now,
            timezone="UTC",
            name=name,
            telegram_id=telegram_id,
        )
        users[telegram_id] = user.id
    async with runtime.sessions() as session, session.begin():
        for n in range(PAGE_SIZE + 2):
            await FactRepository(session).add_many(
                users[ANA], None, [f"Ana fact number {n}"], now + timedelta(seconds=n), source="tool"
            )
    tg.command(ANA, "/memory")
    (report,) = await tg.wait_for_messages(1, chat_id=ANA)
    rows = report.params["reply_markup"]["inline_keyboard"]
    assert [r[0]["text"] for r in rows[:2]] == ["Forget: Ana fact number 9", "Forget: Ana fact number 8"]
    assert len(rows) == PAGE_SIZE + 1 and rows[-1][0]["text"] == "Older ›"

    # Bo presses Ana's button (a forged press in his own chat): nothing of hers changes.
    _press(tg, rows[0][0]["callback_data"], report.message_id, BO)
    await tg.wait_for_calls("answerCallbackQuery", 1)
    _press(tg, rows[0][0]["callback_data"], report.message_id, ANA)
    await tg.wait_for_calls("editMessageText", 2)
    page = tg.calls_to("editMessageText")[-1].params
    assert "Ana fact number 9" not in page["text"] and page["text"].startswith(
        "Facts I remember (page 1 of 2)"
    )

    _press(tg, "memfact:page:2", report.message_id, ANA)
    await tg.wait_for_calls("editMessageText", 3)
    older = tg.calls_to("editMessageText")[-1].params["text"]
    assert older.splitlines()[1:] == ["- Ana fact number 0"]
    async with runtime.sessions() as session:
        gone = (
            await session.execute(
                select(UserFact.content, UserFact.invalid_reason).where(UserFact.invalidated_at.is_not(None))
            )
        ).all()
    assert [tuple(g) for g in gone] == [("Ana fact number 9", "they pressed forget under /memory")]
