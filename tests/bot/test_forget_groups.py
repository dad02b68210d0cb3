"""/forget in a private chat, through the real python-telegram-bot and the fake Bot API: on request it
also blanks what the person said in groups, and only that."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import select

from agent.account.groups import group_owner
from agent.turn.transcript import write_message
from bench.fakes.telegram_api import FakeTelegram
from bot.app import AnyApplication
from bot.handlers.commands import FORGET_CONFIRM_GROUPS, FORGOTTEN
from bot.runtime import Runtime
from db.models import TranscriptMessage, User

ANA, BOB, CHAT = 42, 43, -100_321


async def _group_lines(runtime: Runtime) -> int:
    now = runtime.clock.now()
    group, _ = await group_owner(runtime.sessions, chat_id=CHAT, title="Lake", now=now, timezone="UTC")
    async with runtime.sessions() as session, session.begin():
        for speaker, name, text in ((ANA, "Ana", "my anawordplan"), (BOB, "Bob", "bob likes the lake")):
            row = await write_message(session, group, role="user", content=text, sent_at=now)
            row.speaker_telegram_id, row.speaker_name = speaker, name
    return group.id


async def _group_texts(runtime: Runtime, group_id: int) -> dict[int | None, str]:
    async with runtime.sessions() as session:
        rows = await session.execute(
            select(TranscriptMessage.speaker_telegram_id, TranscriptMessage.content).where(
                TranscriptMessage.user_id == group_id
            )
        )
        return dict(rows.all())


def _press(presser: int, message_id: int, data: str) -> dict[str, Any]:
    chat = {"id": presser, "type": "private", "first_name": "Ana"}
    return {
        "callback_query": {
            "id": f"cb-{presser}",
            "from": {"id": presser, "is_bot": False, "first_name": "Ana"},
            "chat_instance": "1",
            "data": data,
            "message": {"message_id": message_id, "date": 0, "chat": chat, "text": "?"},
        }
    }


async def test_forget_offers_the_groups_and_the_button_blanks_only_the_persons_lines(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    tg.user_message(ANA, "hi")
    await tg.wait_for_messages(1, chat_id=ANA)
    group_id = await _group_lines(runtime)

    tg.command(ANA, "/forget")
    ask = (await tg.wait_for_messages(2, chat_id=ANA))[-1]
    assert FORGET_CONFIRM_GROUPS in json.dumps(ask.params.get("reply_markup"))
    tg.push_update(_press(ANA, ask.message_id, FORGET_CONFIRM_GROUPS))
    assert (await tg.wait_for_messages(3, chat_id=ANA))[-1].text == FORGOTTEN

    async with runtime.sessions() as session:
        assert await session.scalar(select(User).where(User.telegram_id == ANA)) is None
    assert await _group_texts(runtime, group_id) == {ANA: "", BOB: "bob likes the lake"}


async def test_plain_forget_confirm_leaves_the_groups_alone(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    tg.user_message(ANA, "hi")
    await tg.wait_for_messages(1, chat_id=ANA)
    group_id = await _group_lines(runtime)

    tg.command(ANA, "/forget confirm")
    assert (await tg.wait_for_messages(2, chat_id=ANA))[-1].text == FORGOTTEN
    assert await _group_texts(runtime, group_id) == {ANA: "my anawordplan", BOB: "bob likes the lake"}

    tg.command(ANA, "/forget confirm groups")
    assert (await tg.wait_for_messages(3, chat_id=ANA))[-1].text == FORGOTTEN
    assert await _group_texts(runtime, group_id) == {ANA: "", BOB: "bob likes the lake"}
