"""Ephemeral group commands (Bot API 10.2) through the real python-telegram-bot against the fake Bot
API: the group menu marks the commands answered to the asker alone; such a command, sent from the
menu, is answered to its sender only and leaves nothing in the group's memory; one typed by hand is
answered in the group as before; a server that refuses ephemeral answers gets the ordinary reply,
once per command, and is not asked again."""

from __future__ import annotations

import logging
from typing import Any

import pytest
from sqlalchemy import func, select

from bench.fakes.telegram_api import FakeTelegram, SentMessage
from bot.handlers.group_forget import GROUP_FORGET_ADMINS_ONLY, GROUP_FORGOTTEN
from bot.runtime import Runtime
from db.models import TranscriptMessage, User
from tests.bot.conftest import Brain

pytestmark = pytest.mark.both_databases

GROUP, FORUM = -4011, -1001234567811
ANA, BOB = 31, 32


async def group_lines(runtime: Runtime, chat_id: int) -> int:
    """How many transcript rows the group's memory holds."""
    async with runtime.sessions() as session:
        group = await session.scalar(select(User).where(User.chat_id == chat_id))
        assert group is not None
        return int(
            await session.scalar(
                select(func.count())
                .select_from(TranscriptMessage)
                .where(TranscriptMessage.user_id == group.id)
            )
            or 0
        )


async def answer_to(tg: FakeTelegram, chat_id: int, message_id: int) -> SentMessage:
    """The bot's answer to one message of the chat, once it is sent."""
    for n in range(1, 20):
        for sent in await tg.wait_for_messages(n, chat_id=chat_id):
            if (sent.params.get("reply_parameters") or {}).get("message_id") == message_id:
                return sent
    raise AssertionError(f"no answer to message {message_id}")


def private_to(sent: SentMessage) -> int | None:
    """Whom an answer is for alone (its receiver), None for an answer everyone sees."""
    flat = sent.params.get("receiver_user_id")
    nested = (sent.params.get("ephemeral_message_parameters") or {}).get("receiver_user_id")
    assert flat == nested  # the 10.2 and 10.3 spellings of the receiver agree
    return flat


async def test_the_group_menu_marks_the_commands_that_answer_the_asker_alone(
    tg: FakeTelegram, app: Any
) -> None:
    menu = {c["command"]: c.get("is_ephemeral", False) for c in tg.commands[("all_group_chats", "")]}
    assert menu == {"help": True, "memory": False, "timezone": True, "forget": True}
    # /memory is the group's: no app can send it as an ephemeral command.
    with pytest.raises(AssertionError, match="no ephemeral /memory"):
        tg.group_command(GROUP, ANA, "/memory", ephemeral=True)


async def test_an_ephemeral_command_is_answered_to_its_sender_alone_and_not_remembered(
    tg: FakeTelegram, brain: Brain, runtime: Runtime, app: Any
) -> None:
    tg.group_message(GROUP, BOB, "the lake on Sunday?", first_name="Bob")
    tg.mention(GROUP, ANA, "what do you think?", first_name="Ana")
    await tg.wait_for_messages(1, chat_id=GROUP)
    before = await group_lines(runtime, GROUP)
    assert before == 3  # Bob's line, Ana's question, the answer

    asked = tg.group_command(GROUP, ANA, "/help", ephemeral=True, first_name="Ana")["message"]
    helped = (await tg.wait_for_messages(2, chat_id=GROUP))[-1]
    assert "reply to one of my messages" in helped.text
    assert private_to(helped) == ANA
    assert helped.params["reply_parameters"] == {"ephemeral_message_id": asked["ephemeral_message_id"]}
    tg.group_command(GROUP, ANA, "/timezone", ephemeral=True, first_name="Ana")
    shown = (await tg.wait_for_messages(3, chat_id=GROUP))[-1]
    assert shown.text.startswith("This group's time zone is") and private_to(shown) == ANA
    # Ana replies to the answer only she sees: the group's memory holds none of it, and nobody answers.
    tg.group_message(
        GROUP, ANA, "thanks Nikita", first_name="Ana", ephemeral_message_id=99, receiver_user=tg.bot_user
    )
    later = tg.mention(GROUP, BOB, "and you?", first_name="Bob")["message"]["message_id"]
    await answer_to(tg, GROUP, later)  # a group's updates are worked in order: Ana's came first
    assert await group_lines(runtime, GROUP) == before + 2  # Bob's question and its answer only
    assert len(tg.messages_to(GROUP)) == 4 and len(brain.chat_calls) == 2
    assert all("thanks" not in call for call in brain.chat_calls)


async def test_in_a_topic_the_ephemeral_answer_stays_in_the_topic(tg: FakeTelegram, app: Any) -> None:
    tg.group_command(FORUM, BOB, "/help", ephemeral=True, first_name="Bob", thread_id=5)
    helped = (await tg.wait_for_messages(1, chat_id=FORUM))[0]
    assert private_to(helped) == BOB and helped.params["message_thread_id"] == 5


async def test_a_command_typed_by_hand_is_answered_in_the_group_as_before(tg: FakeTelegram, app: Any) -> None:
    asked = tg.group_command(GROUP, BOB, "/help@nikita_test_bot", first_name="Bob")["message"]
    helped = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
    assert private_to(helped) is None
    assert helped.params["reply_parameters"]["message_id"] == asked["message_id"]


async def test_forget_warns_the_asker_alone_and_tells_the_group_it_is_done(
    tg: FakeTelegram, runtime: Runtime, app: Any
) -> None:
    tg.mention(GROUP, ANA, "remember the lake", first_name="Ana")
    await tg.wait_for_messages(1, chat_id=GROUP)
    tg.group_command(GROUP, BOB, "/forget confirm", ephemeral=True, first_name="Bob")
    refused = (await tg.wait_for_messages(2, chat_id=GROUP))[-1]
    assert refused.text == GROUP_FORGET_ADMINS_ONLY and private_to(refused) == BOB
    tg.make_admin(GROUP, ANA)
    tg.group_command(GROUP, ANA, "/forget", ephemeral=True, first_name="Ana")
    warned = (await tg.wait_for_messages(3, chat_id=GROUP))[-1]
    assert "cannot be undone" in warned.text and private_to(warned) == ANA
    tg.group_command(GROUP, ANA, "/forget confirm", ephemeral=True, first_name="Ana")
    done = (await tg.wait_for_messages(4, chat_id=GROUP))[-1]
    # Everyone's memory of the group is gone: everyone is told, not as a reply to a message they never saw.
    assert done.text == GROUP_FORGOTTEN and private_to(done) is None
    assert "reply_parameters" not in done.params


async def test_a_server_refusing_ephemeral_answers_gets_the_ordinary_reply_once(
    tg: FakeTelegram, app: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.handlers.group_answers")
    tg.ephemeral_sends = False
    tg.group_command(GROUP, ANA, "/help", ephemeral=True, first_name="Ana")
    [helped] = await tg.wait_for_messages(1, chat_id=GROUP)
    assert "reply to one of my messages" in helped.text and private_to(helped) is None
    refused = [c for c in tg.calls_to("sendMessage") if "receiver_user_id" in c.params]
    assert len(refused) == 1  # asked once, refused (400), answered in the group once
    tg.group_command(GROUP, BOB, "/timezone", ephemeral=True, first_name="Bob")
    shown = (await tg.wait_for_messages(2, chat_id=GROUP))[-1]
    assert shown.text.startswith("This group's time zone is") and private_to(shown) is None
    # This process no longer asks: the second command went straight to the ordinary reply.
    assert len(tg.calls_to("sendMessage")) == 3
    warnings = [r for r in caplog.records if r.name == "bot.handlers.group_answers"]
    assert len(warnings) == 1 and "refused an ephemeral answer" in warnings[0].getMessage()


async def test_an_ephemeral_answer_refused_for_another_reason_costs_that_answer_only(
    tg: FakeTelegram, app: Any
) -> None:
    # The server knows ephemeral messages, but not the one answered (gone: its time to answer passed).
    tg.group_command(
        GROUP, ANA, "/help", first_name="Ana", ephemeral_message_id=9_999, receiver_user=tg.bot_user
    )
    [helped] = await tg.wait_for_messages(1, chat_id=GROUP)
    assert "reply to one of my messages" in helped.text and private_to(helped) is None
    # The next ephemeral command is still answered to its sender alone.
    tg.group_command(GROUP, BOB, "/timezone", ephemeral=True, first_name="Bob")
    shown = (await tg.wait_for_messages(2, chat_id=GROUP))[-1]
    assert shown.text.startswith("This group's time zone is") and private_to(shown) == BOB
