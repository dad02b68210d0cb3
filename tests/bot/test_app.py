"""Polling end to end: the real python-telegram-bot, the fake Bot API, a scripted model, a real database."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from sqlalchemy import func, select
from telegram.ext import CommandHandler

from agent.core.settings import Settings
from agent.turn.run import FAULT_APOLOGY
from bench.fakes.telegram_api import FakeTelegram
from bot.app import AnyApplication, build_application, running
from bot.handlers.commands import BUTTON_NOT_HERE, FORGET_ASK, FORGOTTEN, USER_COMMANDS, help_text
from bot.handlers.messages import ERROR_REPLY, UNKNOWN_COMMAND
from bot.runtime import Runtime, build_runtime
from bot.services import services_of
from db.models import InboxUpdate, TranscriptMessage, User
from tests.bot.conftest import ADMIN, Brain
from tests.privacy import rows_of

ALICE = 42
BOB = 43


async def user_row(runtime: Runtime, telegram_id: int) -> User | None:
    async with runtime.sessions() as session:
        return await session.scalar(select(User).where(User.telegram_id == telegram_id))


async def onboard(tg: FakeTelegram, chat: int = ALICE) -> None:
    """Run the scripted onboarding to completion (4 replies)."""
    tg.command(chat, "/start")
    await tg.wait_for_messages(1, chat_id=chat)
    for n, text in enumerate(
        ["call me Sam", "I'm in Lisbon", "I like chess, no politics please. That's all"], 2
    ):
        tg.user_message(chat, text)
        await tg.wait_for_messages(n, chat_id=chat)


async def test_start_onboards_then_the_main_agent_answers(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime, brain: Brain
) -> None:
    await onboard(tg)
    sent = [m.text for m in tg.messages_to(ALICE)]
    assert sent[0].startswith("Hi! I'm Nikita")
    assert "saved name: Sam" in sent[1]
    assert "Europe/Lisbon" in sent[2]
    assert sent[3] == "All set! Talk to me about anything."
    assert brain.chat_calls == []  # nothing reached the main agent during onboarding
    user = await user_row(runtime, ALICE)
    assert user is not None
    assert (user.name, user.timezone, user.onboarding_status) == ("Sam", "Europe/Lisbon", "complete")
    assert user.profile["interests"] == ["chess"] and user.profile["boundaries"] == ["no politics"]

    tg.user_message(ALICE, "how are you?")
    replies = await tg.wait_for_messages(5, chat_id=ALICE)
    assert replies[-1].text == "echo: how are you?"
    assert all(m.parse_mode is None for m in replies)
    async with runtime.sessions() as session:
        kinds = (
            await session.execute(select(TranscriptMessage.kind).order_by(TranscriptMessage.id))
        ).scalars()
        assert list(kinds) == ["onboarding"] * 8 + ["text", "text"]
    # The command menu holds the user commands only.
    assert [c["command"] for c in tg.commands[("default", "")]] == [name for name, _ in USER_COMMANDS]
    assert tg.calls_to("sendChatAction")


async def test_without_onboarding_new_users_go_straight_to_the_agent(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel

    settings = settings_factory(onboarding_enabled=False, default_timezone="Europe/Paris")
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        tg.user_message(7, "hello", first_name="Bea")
        replies = await tg.wait_for_messages(1, chat_id=7)
    assert replies[0].text == "echo: hello"
    user = await user_row(runtime, 7)
    assert user is not None and (user.name, user.timezone, user.onboarding_status) == (
        "Bea",
        "Europe/Paris",
        "complete",
    )


async def test_non_text_updates_are_stored_and_answered_without_the_model(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime, brain: Brain
) -> None:
    tg.sticker(ALICE, emoji="😀")
    tg.photo(ALICE, caption="my cat")
    tg.voice(ALICE)
    tg.document(ALICE, file_name="notes.txt")
    replies = await tg.wait_for_messages(4, chat_id=ALICE)
    assert "sticker" in replies[0].text and "pictures" in replies[1].text
    # Edits and channel posts are ignored, without a crash; a later text still works.
    first = tg.user_message(ALICE, "call me Sam")
    await tg.wait_for_messages(5, chat_id=ALICE)
    tg.edited_message(ALICE, "call me Samuel", message_id=first["message"]["message_id"])
    tg.channel_post(-100123, "news")
    tg.command(ALICE, "/nonsense")
    replies = await tg.wait_for_messages(6, chat_id=ALICE)
    assert replies[5].text == UNKNOWN_COMMAND
    assert brain.chat_calls == []
    async with runtime.sessions() as session:
        rows = (
            await session.execute(
                select(TranscriptMessage.kind, TranscriptMessage.content)
                .where(TranscriptMessage.role == "user")
                .order_by(TranscriptMessage.id)
            )
        ).all()
    assert rows[:4] == [
        ("sticker", "[sticker 😀]"),
        ("photo", "[photo] my cat"),
        ("voice", "[voice 3s]"),
        ("document", "[document notes.txt]"),
    ]
    assert len(tg.messages_to(-100123)) == 0


async def test_long_replies_are_split_and_sent_formatted(
    app: AnyApplication, tg: FakeTelegram, brain: Brain, runtime: Runtime
) -> None:
    await onboard(tg)
    paragraph = "This *is* markup_, just [text]. " * 40
    brain.reply = lambda text: "\n\n".join([paragraph] * 8)  # ~10,000 characters
    tg.user_message(ALICE, "tell me everything")
    sent = await tg.wait_for_messages(7, chat_id=ALICE)
    parts = sent[4:]
    assert len(parts) == 3
    assert all(len(p.text) <= 4096 and p.parse_mode is None for p in parts)
    # Markdown is rendered as entities (no markers left), never with a parse_mode that could fail.
    squash = lambda s: s.replace("\n", "").replace(" ", "")  # noqa: E731
    assert squash("".join(p.text for p in parts)) == squash(brain.reply("").replace("*", ""))
    assert sum(len(p.params["entities"]) for p in parts) == 8 * 40


async def test_rate_limit_answers_kindly_without_calling_the_model(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    from pydantic_ai.models.function import FunctionModel
    from pydantic_ai.models.test import TestModel

    settings = settings_factory(onboarding_enabled=False, rate_limit_per_minute=3)
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1) as runner:
        for n in range(6):
            tg.user_message(ALICE, f"message {n}")
        replies = await tg.wait_for_messages(4, chat_id=ALICE)
        for _ in range(100):  # all six stored and handled
            async with runtime.sessions() as session:
                done = await session.scalar(
                    select(func.count()).select_from(InboxUpdate).where(InboxUpdate.status == "done")
                )
            if done == 6 and await runner.dispatcher.drain(within=10):
                break
            await asyncio.sleep(0.05)
        assert done == 6
    assert [r.text for r in replies[:3]] == [f"echo: message {n}" for n in range(3)]
    # One kind note for the burst, not one per refused message.
    assert [r.text for r in tg.messages_to(ALICE)][3:] == [replies[3].text]
    assert "a lot of messages" in replies[3].text
    assert len(brain.chat_calls) == 3


async def test_export_sends_a_json_document(app: AnyApplication, tg: FakeTelegram) -> None:
    await onboard(tg)
    tg.command(ALICE, "/export")
    document = (await tg.wait_for_documents(1))[0]
    assert document.filename == "nikita-export.json"
    data = json.loads(document.content)
    assert data["user"]["name"] == "Sam"
    assert [m["content"] for m in data["messages"]][:2][0] == "/start"


class RecordingStore:
    """A store outside the core tables (like a search index) that /forget must empty."""

    name = "search_index"

    def __init__(self) -> None:
        self.rows: dict[int, list[str]] = {}

    async def export_user(self, user_id: int) -> Any:
        return self.rows.get(user_id, [])

    async def forget_user(self, user_id: int) -> None:
        self.rows.pop(user_id, None)


async def test_forget_asks_then_deletes_everything(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    store = RecordingStore()
    runtime.data_stores.append(store)
    await onboard(tg)
    tg.user_message(ALICE, "remember this")
    tg.sticker(ALICE)
    await tg.wait_for_messages(6, chat_id=ALICE)
    user = await user_row(runtime, ALICE)
    assert user is not None
    store.rows[user.id] = ["remember this"]
    before = await rows_of(runtime.sessions, user.id)
    assert before["users"] == 1 and before["transcript_messages"] > 0 and before["generated_prompts"] > 0

    tg.command(ALICE, "/forget")
    ask = (await tg.wait_for_messages(7, chat_id=ALICE))[-1]
    assert ask.text == FORGET_ASK and ask.params.get("reply_markup")
    assert await user_row(runtime, ALICE) is not None  # asking deletes nothing

    tg.command(ALICE, "/forget confirm")
    assert (await tg.wait_for_messages(8, chat_id=ALICE))[-1].text == FORGOTTEN
    after = await rows_of(runtime.sessions, user.id)
    assert set(after.values()) == {0}, after
    assert store.rows == {}


async def test_forget_button_confirms(app: AnyApplication, tg: FakeTelegram, runtime: Runtime) -> None:
    tg.user_message(ALICE, "hi")
    await tg.wait_for_messages(1, chat_id=ALICE)
    tg.command(ALICE, "/forget")
    ask = (await tg.wait_for_messages(2, chat_id=ALICE))[-1]
    tg.push_update(
        {
            "callback_query": {
                "id": "cb1",
                "from": {"id": ALICE, "is_bot": False, "first_name": "Alice"},
                "chat_instance": "1",
                "data": "forget:confirm",
                "message": {
                    "message_id": ask.message_id,
                    "date": 0,
                    "chat": {"id": ALICE, "type": "private", "first_name": "Alice"},
                    "text": ask.text,
                },
            }
        }
    )
    assert (await tg.wait_for_messages(3, chat_id=ALICE))[-1].text == FORGOTTEN
    assert await user_row(runtime, ALICE) is None
    assert tg.calls_to("answerCallbackQuery")


def forget_press(presser: int, chat: dict[str, Any], message_id: int) -> dict[str, Any]:
    """A forget-confirmation press by `presser` on a message in `chat`."""
    return {
        "callback_query": {
            "id": f"cb-{presser}-{chat['id']}",
            "from": {"id": presser, "is_bot": False, "first_name": "Alice"},
            "chat_instance": str(chat["id"]),
            "data": "forget:confirm",
            "message": {"message_id": message_id, "date": 0, "chat": chat, "text": FORGET_ASK},
        }
    }


async def test_a_forget_press_outside_the_pressers_own_chat_is_refused(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    for chat in (ALICE, BOB):
        tg.user_message(chat, f"a secret of {chat}")
        await tg.wait_for_messages(1, chat_id=chat)
    tg.command(BOB, "/forget")
    ask = (await tg.wait_for_messages(2, chat_id=BOB))[-1]
    dispatcher = services_of(app).delivery.dispatcher
    assert await dispatcher.drain(within=15)
    users = {chat: await user_row(runtime, chat) for chat in (ALICE, BOB)}
    before = {chat: await rows_of(runtime.sessions, user.id) for chat, user in users.items() if user}
    assert len(before) == 2 and all(rows["transcript_messages"] == 2 for rows in before.values())

    # Alice presses Bob's button (a forged update), then one on a message in a group.
    tg.push_update(forget_press(ALICE, {"id": BOB, "type": "private", "first_name": "Bob"}, ask.message_id))
    tg.push_update(forget_press(ALICE, {"id": -100, "type": "group", "title": "friends"}, 1))
    answers = await tg.wait_for_calls("answerCallbackQuery", 2)
    assert await dispatcher.drain(within=15)

    assert len(tg.messages_to(BOB)) == 2 and tg.messages_to(-100) == []  # nothing said to Bob
    assert len(tg.messages_to(ALICE)) == 1
    after = {chat: await rows_of(runtime.sessions, user.id) for chat, user in users.items() if user}
    # Neither lost anything; Alice's two presses are stored in the inbox like any update of hers.
    assert after[ALICE].pop("inbox_updates") == before[ALICE].pop("inbox_updates") + 2
    assert after == before
    assert [(a.params.get("show_alert"), a.params.get("text")) for a in answers] == [
        (True, BUTTON_NOT_HERE)
    ] * 2


async def test_admin_commands_only_for_admins(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    await onboard(tg)
    tg.user_message(ALICE, "a real turn")
    await tg.wait_for_messages(5, chat_id=ALICE)
    for command in ("/stats", "/user 42", "/prompt 42", "/jobs", "/reprocess 1"):
        tg.command(ALICE, command)
    non_admin = await tg.wait_for_messages(10, chat_id=ALICE)
    assert [m.text for m in non_admin[5:]] == [UNKNOWN_COMMAND] * 5

    tg.command(ADMIN, "/stats")
    stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert "users: 1" in stats and "messages: 10" in stats and "job queue depth: 0" in stats
    # The one real turn is one chat call; onboarding's calls are counted apart.
    assert "model use today (UTC): " in stats and "chat 1" in stats
    tg.command(ADMIN, "/user 42")
    user = (await tg.wait_for_messages(2, chat_id=ADMIN))[-1].text
    assert "Sam" in user and "model use per day" in user and "chat 1" in user and "onboarding" in user
    tg.command(ADMIN, "/prompt 42")
    assert "History" in (await tg.wait_for_messages(3, chat_id=ADMIN))[-1].text
    tg.command(ADMIN, "/jobs")
    assert "post-processing queue" in (await tg.wait_for_messages(4, chat_id=ADMIN))[-1].text
    tg.command(ADMIN, "/reprocess 999")
    assert "does not exist" in (await tg.wait_for_messages(5, chat_id=ADMIN))[-1].text


async def test_help_timezone_and_memory(app: AnyApplication, tg: FakeTelegram, runtime: Runtime) -> None:
    await onboard(tg)
    tg.command(ALICE, "/help")
    tg.command(ALICE, "/timezone")
    tg.command(ALICE, "/timezone San Francisco")
    tg.command(ALICE, "/timezone Qwertyville")
    tg.command(ALICE, "/memory")
    sent = [m.text for m in await tg.wait_for_messages(9, chat_id=ALICE)][4:]
    assert sent[0] == help_text("Nikita")
    assert "Europe/Lisbon" in sent[1]
    assert "America/Los_Angeles" in sent[2]
    assert "couldn't place" in sent[3]
    assert "Sam" in sent[4] and "chess" in sent[4] and "no politics" in sent[4]
    user = await user_row(runtime, ALICE)
    assert user is not None and user.timezone == "America/Los_Angeles"


async def test_language_shows_sets_and_refuses(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    await onboard(tg)
    tg.command(ALICE, "/language Klingonese")
    tg.command(ALICE, "/language Русский")
    tg.command(ALICE, "/language")
    sent = [m.text for m in await tg.wait_for_messages(7, chat_id=ALICE)][4:]
    assert "don't know the language" in sent[0]
    assert "as ru" in sent[1] and "is ru" in sent[2]
    user = await user_row(runtime, ALICE)
    assert user is not None and user.language == "ru"


async def test_timezone_asks_which_portland_and_takes_the_answer(
    app: AnyApplication, tg: FakeTelegram, runtime: Runtime
) -> None:
    await onboard(tg)
    tg.command(ALICE, "/timezone Portland")
    asked = (await tg.wait_for_messages(5, chat_id=ALICE))[-1].text
    lines = asked.splitlines()
    assert lines[1:] == [
        "/timezone Portland, Oregon, United States (America/Los_Angeles)",
        "/timezone Portland, Maine, United States (America/New_York)",
    ]
    user = await user_row(runtime, ALICE)
    assert user is not None and user.timezone == "Europe/Lisbon"  # nothing changes until they pick
    tg.command(ALICE, "/timezone Portland, Maine")
    assert "America/New_York" in (await tg.wait_for_messages(6, chat_id=ALICE))[-1].text
    user = await user_row(runtime, ALICE)
    assert user is not None and user.timezone == "America/New_York"


async def test_repeated_message_id_gives_one_turn(
    app: AnyApplication, tg: FakeTelegram, brain: Brain
) -> None:
    await onboard(tg)
    first = tg.user_message(ALICE, "only once")
    await tg.wait_for_messages(5, chat_id=ALICE)
    tg.user_message(
        ALICE, "only once", message_id=first["message"]["message_id"], date=first["message"]["date"]
    )
    tg.user_message(ALICE, "next")
    sent = await tg.wait_for_messages(7, chat_id=ALICE)
    # The repeat is sent the answer stored the first time (its delivery may be the one that was
    # never sent), without a second turn.
    assert [m.text for m in sent[-3:]] == ["echo: only once", "echo: only once", "echo: next"]
    assert brain.chat_calls == ["only once", "next"]


async def test_a_bug_gets_an_honest_answer_and_the_bot_goes_on(
    app: AnyApplication, tg: FakeTelegram, brain: Brain, runtime: Runtime
) -> None:
    await onboard(tg)
    brain.raise_on = "boom"
    tg.user_message(ALICE, "boom")
    # A bug in the chat path still stores the exchange, with an apology as the answer.
    assert (await tg.wait_for_messages(5, chat_id=ALICE))[-1].text == FAULT_APOLOGY
    tg.user_message(ALICE, "still there?")
    assert (await tg.wait_for_messages(6, chat_id=ALICE))[-1].text == "echo: still there?"
    async with runtime.sessions() as session:
        kinds = (
            await session.execute(
                select(TranscriptMessage.kind, TranscriptMessage.content)
                .where(TranscriptMessage.kind != "onboarding")
                .order_by(TranscriptMessage.id)
            )
        ).all()
    assert [tuple(k) for k in kinds] == [
        ("text", "boom"),
        ("apology", FAULT_APOLOGY),
        ("text", "still there?"),
        ("text", "echo: still there?"),
    ]


async def test_a_handler_that_crashes_gets_the_error_reply_once(
    app: AnyApplication, tg: FakeTelegram
) -> None:
    async def crash(update: Any, context: Any) -> None:
        raise LookupError("a bug in a handler")

    app.add_handler(CommandHandler("crash", crash), group=-1)
    tg.command(ALICE, "/crash")
    assert [m.text for m in await tg.wait_for_messages(1, chat_id=ALICE)] == [ERROR_REPLY]
    tg.command(ALICE, "/help")
    assert [m.text for m in await tg.wait_for_messages(2, chat_id=ALICE)] == [
        ERROR_REPLY,
        help_text("Nikita"),
    ]
