"""A group's limits through the real python-telegram-bot against the fake Bot API: its addressed
messages count against the group's own rate limit (one note, no model call, the message still heard),
its turns against GROUP_DAILY_TOKENS (which /stats counts), and a group the allowlist leaves out costs
nothing at all.

Once, on SQLite: the SQL behind these runs on both databases in tests/agent/test_group_limits.py.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select

from agent.account.ratelimit import Verdict
from agent.core.settings import Settings
from agent.turn.daily_tokens import CAP_REPLY
from bench.fakes.telegram_api import FakeTelegram
from db.models import InboxUpdate, TranscriptMessage, User
from tests.bot.conftest import ADMIN, Brain
from tests.bot.test_access import bot, drained
from tests.bot.test_groups import group_lines, reply_target

GROUP, STRANGE_GROUP = -4001, -4002
ANA, BOB = 11, 12


async def test_a_group_over_its_minute_limit_gets_one_note_and_no_model_call(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(group_rate_limit_per_minute=2, onboarding_enabled=False)
    note = Verdict(False, "group", "minute").message
    async with bot(settings, brain) as (runtime, application):
        for n, text in enumerate(["one?", "two?"], 1):
            tg.mention(GROUP, ANA, text, first_name="Ana")
            await tg.wait_for_messages(n, chat_id=GROUP)
        third = tg.mention(GROUP, BOB, "three?", first_name="Bob")
        sent = await tg.wait_for_messages(3, chat_id=GROUP)
        tg.mention(GROUP, BOB, "four?", first_name="Bob")
        # A member's own private allowance is not the group's: Bob still gets a private answer.
        tg.user_message(BOB, "hello in private")
        await tg.wait_for_messages(1, chat_id=BOB)
        await drained(application)
        lines = await group_lines(runtime, GROUP)
    assert sent[2].text == note
    assert reply_target(sent[2]) == third["message"]["message_id"]
    assert len(tg.messages_to(GROUP)) == 3  # told once in the window, not once per message
    assert brain.chat_calls == [
        "Ana (to you): @nikita_test_bot one?",
        "Ana (to you): @nikita_test_bot two?",
        "hello in private",
    ]
    # Over the limit a message is still heard, with its speaker, and answered by nothing.
    assert [(role, name, text) for role, name, _, text in lines] == [
        ("user", "Ana", "@nikita_test_bot one?"),
        ("assistant", None, "echo: Ana (to you): @nikita_test_bot one?"),
        ("user", "Ana", "@nikita_test_bot two?"),
        ("assistant", None, "echo: Ana (to you): @nikita_test_bot two?"),
        ("user", "Bob", "@nikita_test_bot three?"),
        ("user", "Bob", "@nikita_test_bot four?"),
    ]


async def test_the_group_daily_token_cap_stops_its_turns(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(group_daily_tokens=1, onboarding_enabled=False)
    async with bot(settings, brain):
        tg.mention(GROUP, ANA, "first?", first_name="Ana")
        await tg.wait_for_messages(1, chat_id=GROUP)
        tg.mention(GROUP, ANA, "second?", first_name="Ana")
        sent = await tg.wait_for_messages(2, chat_id=GROUP)
        # The group's spending is its own: a member's private chat is not capped by it.
        tg.user_message(ANA, "hi privately")
        private = await tg.wait_for_messages(1, chat_id=ANA)
        # The operator sees the refusal, and the group apart from the one person.
        tg.command(ADMIN, "/stats")
        stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
        tg.command(ADMIN, f"/user {GROUP}")
        group = (await tg.wait_for_messages(2, chat_id=ADMIN))[-1].text
    assert sent[1].text == CAP_REPLY
    assert "users: 1 person, 1 group" in stats and "1 over GROUP_DAILY_TOKENS" in stats
    assert f"(chat {GROUP}): Friends" in group.splitlines()[0] and ": 1 calls" in group
    assert private[0].text == "echo: hi privately"
    assert brain.chat_calls == ["Ana (to you): @nikita_test_bot first?", "hi privately"]


async def test_a_group_not_on_the_allowlist_gets_nothing_and_leaves_nothing(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(access="allowlist", allowed_users=f"{GROUP}", onboarding_enabled=False)
    async with bot(settings, brain) as (runtime, application):
        tg.group_message(STRANGE_GROUP, ANA, "just chatting", first_name="Ana")
        tg.mention(STRANGE_GROUP, ANA, "are you there?", first_name="Ana")
        tg.group_message(STRANGE_GROUP, BOB, "nikita, hello?", first_name="Bob")
        # The allowed group, sent last, is answered: the refused ones before it were worked.
        tg.mention(GROUP, BOB, "and here?", first_name="Bob")
        await tg.wait_for_messages(1, chat_id=GROUP)
        await drained(application)
        async with runtime.sessions() as session:
            owners = (await session.execute(select(User.chat_id))).scalars().all()
            stored = await session.scalar(select(func.count()).select_from(TranscriptMessage))
            rows = (await session.execute(select(InboxUpdate.status))).scalars().all()
    assert tg.messages_to(STRANGE_GROUP) == []
    assert owners == [GROUP]  # no owner row for the refused group, no person row for its members
    assert stored == 2  # the allowed group's question and answer, nothing of the other group
    assert brain.chat_calls == ["Bob (to you): @nikita_test_bot and here?"]
    assert rows == ["done"] * 4
