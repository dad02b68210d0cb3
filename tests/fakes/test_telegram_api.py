"""The fake Bot API, driven by the real python-telegram-bot over HTTP."""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from telegram import (
    Bot,
    BotCommand,
    BotCommandScopeAllGroupChats,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
    Update,
)
from telegram.error import BadRequest, Conflict, Forbidden, InvalidToken, RetryAfter
from telegram.ext import (
    Application,
    ApplicationBuilder,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    filters,
)

from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.telegram_markup import plain_from_html, plain_from_markdown_v2

TOKEN = "123:ABC"


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def bot(tg: FakeTelegram) -> AsyncIterator[Bot]:
    async with Bot(TOKEN, base_url=tg.base_url, base_file_url=tg.base_file_url) as b:
        yield b


async def echo(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Reply with the same text."""
    assert update.effective_message is not None and update.effective_message.text is not None
    await update.effective_message.reply_text(update.effective_message.text)


async def start(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Greet, with the command's arguments."""
    assert update.effective_message is not None
    await update.effective_message.reply_text(f"hello {' '.join(context.args or [])}".strip())


async def non_text(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
    """Name what arrived."""
    message = update.effective_message
    assert message is not None
    kinds = {"sticker": message.sticker, "photo": message.photo, "voice": message.voice}
    kind = next((name for name, value in kinds.items() if value), "other")
    await message.reply_text(f"got a {kind}")


def build_app(tg: FakeTelegram) -> Application:  # type: ignore[type-arg]
    app = ApplicationBuilder().token(TOKEN).base_url(tg.base_url).base_file_url(tg.base_file_url).build()
    app.add_handler(CommandHandler("start", start))
    app.add_handler(MessageHandler(filters.TEXT & ~filters.COMMAND, echo))
    app.add_handler(MessageHandler(filters.Sticker.ALL | filters.PHOTO | filters.VOICE, non_text))
    return app


async def test_polling_application_echoes_pushed_updates(tg: FakeTelegram) -> None:
    app = build_app(tg)
    started = time.monotonic()
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(poll_interval=0, timeout=1)
        try:
            tg.user_message(42, "hi there")
            tg.command(42, "/start friend")
            tg.user_message(7, "other user")
            tg.sticker(42)
            tg.photo(42)
            tg.voice(42)
            replies = await tg.wait_for_messages(5, chat_id=42, timeout=5)
            other = await tg.wait_for_messages(1, chat_id=7, timeout=5)
        finally:
            await app.updater.stop()
            await app.stop()
    assert sorted(m.text for m in replies) == sorted(
        ["hi there", "hello friend", "got a sticker", "got a photo", "got a voice"]
    )
    assert [m.text for m in other] == ["other user"]
    assert tg.pending_updates == 0  # the final getUpdates confirmed everything
    assert tg.calls_to("deleteWebhook"), "start_polling clears a webhook first"
    assert time.monotonic() - started < 5


async def test_long_poll_returns_early_when_an_update_arrives(tg: FakeTelegram, bot: Bot) -> None:
    assert await bot.get_updates(timeout=0) == ()
    started = time.monotonic()
    empty = await bot.get_updates(timeout=1)
    assert empty == () and time.monotonic() - started >= 0.9
    pushed = tg.user_message(5, "first")
    updates = await bot.get_updates(timeout=5)
    assert [u.update_id for u in updates] == [pushed["update_id"]]
    assert updates[0].message is not None and updates[0].message.text == "first"
    assert await bot.get_updates(offset=updates[0].update_id + 1, timeout=0) == ()
    assert tg.pending_updates == 0


async def test_allowed_updates_filter_and_edited_and_channel_updates(tg: FakeTelegram, bot: Bot) -> None:
    tg.edited_message(5, "fixed", message_id=1)
    tg.channel_post(-1001234, "news")
    only_edits = await bot.get_updates(allowed_updates=["edited_message"])
    assert [u.edited_message.text for u in only_edits if u.edited_message] == ["fixed"]
    everything = await bot.get_updates(allowed_updates=[])
    assert everything[1].channel_post is not None and everything[1].channel_post.text == "news"


async def test_raw_update_is_delivered_verbatim(tg: FakeTelegram, bot: Bot) -> None:
    chat = {"id": 1, "type": "private"}
    message = {"message_id": 1, "date": 0, "chat": chat, "unknown_field": True}
    tg.raw_update({"update_id": 99, "message": message})
    (update,) = await bot.get_updates()
    assert update.update_id == 99 and update.message is not None and update.message.text is None


async def test_send_document_stores_bytes(tg: FakeTelegram, bot: Bot) -> None:
    content = os.urandom(2000) + b"\r\n--boundary-like\r\n"
    message = await bot.send_document(42, content, filename="export.bin", caption="your data")
    (doc,) = tg.documents
    assert (doc.chat_id, doc.filename, doc.content, doc.caption) == (42, "export.bin", content, "your data")
    assert message.document is not None and message.document.file_name == "export.bin"


async def test_webhook_commands_and_misc_methods(tg: FakeTelegram, bot: Bot) -> None:
    assert await bot.set_webhook("https://example.test/telegram/webhook", secret_token="s3cret")
    assert (tg.webhook_url, tg.webhook_secret) == ("https://example.test/telegram/webhook", "s3cret")
    assert (await bot.get_webhook_info()).url == "https://example.test/telegram/webhook"
    with pytest.raises(Conflict):
        await bot.get_updates()
    assert await bot.delete_webhook()
    assert await bot.set_my_commands([BotCommand("start", "Begin"), BotCommand("forget", "Forget me")])
    assert [c.command for c in await bot.get_my_commands()] == ["start", "forget"]
    assert await bot.delete_my_commands() and await bot.get_my_commands() == ()
    assert await bot.send_chat_action(42, "typing")
    assert await bot.answer_callback_query("1")
    assert tg.calls_to("sendChatAction")[0].params == {"chat_id": 42, "action": "typing"}


async def test_edit_message_text(tg: FakeTelegram, bot: Bot) -> None:
    sent = await bot.send_message(42, "draft")
    edited = await bot.edit_message_text("final", chat_id=42, message_id=sent.message_id)
    assert not isinstance(edited, bool) and edited.text == "final"
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_text("final", chat_id=42, message_id=sent.message_id)
    with pytest.raises(BadRequest, match="Message to edit not found"):
        await bot.edit_message_text("x", chat_id=42, message_id=999)


async def test_taking_the_buttons_off_twice_is_not_modified(tg: FakeTelegram, bot: Bot) -> None:
    buttons = InlineKeyboardMarkup([[InlineKeyboardButton("Done", callback_data="done")]])
    sent = await bot.send_message(42, "⏰ tea", reply_markup=buttons)
    await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id, reply_markup=None)
    assert "reply_markup" not in tg.calls_to("editMessageReplyMarkup")[-1].params
    with pytest.raises(BadRequest, match="Message is not modified"):
        await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id, reply_markup=None)
    await bot.edit_message_reply_markup(chat_id=42, message_id=sent.message_id, reply_markup=buttons)


async def test_send_message_returns_a_real_message(tg: FakeTelegram, bot: Bot) -> None:
    first = await bot.send_message(42, "<b>bold</b> &amp; plain", parse_mode="HTML")
    second = await bot.send_message(42, "two")
    assert first.text == "bold & plain" and first.from_user is not None and first.from_user.is_bot
    assert second.message_id == first.message_id + 1 and first.chat.id == 42
    assert [(m.text, m.parse_mode) for m in tg.sent] == [("<b>bold</b> &amp; plain", "HTML"), ("two", None)]


@pytest.mark.parametrize(
    ("text", "parse_mode", "error"),
    [
        ("x" * 4097, None, "message is too long"),
        ("", None, "message text is empty"),
        ("<b>open", "HTML", 'Can\'t find end tag corresponding to start tag "b"'),
        ("line<br>break", "HTML", 'Unsupported start tag "br"'),
        ("1 < 2", "HTML", "Unclosed start tag"),
        ("<b>x</i>", "HTML", "Unmatched end tag"),
        ("Hello.", "MarkdownV2", "Character '.' is reserved"),
        ("*bold", "MarkdownV2", "Can't find end of Bold entity"),
    ],
)
async def test_send_message_rejects_like_telegram(
    bot: Bot, text: str, parse_mode: str | None, error: str
) -> None:
    with pytest.raises(BadRequest, match="(?i)" + re.escape(error)):
        await bot.send_message(42, text, parse_mode=parse_mode)


async def test_exactly_4096_characters_is_accepted(tg: FakeTelegram, bot: Bot) -> None:
    await bot.send_message(42, "y" * 4096)
    assert len(tg.wait_sent(1)[0].text) == 4096


async def test_callback_data_past_64_bytes_is_refused_like_telegram(tg: FakeTelegram, bot: Bot) -> None:
    def keyboard(data: str) -> InlineKeyboardMarkup:
        return InlineKeyboardMarkup([[InlineKeyboardButton("press", callback_data=data)]])

    sent = await bot.send_message(42, "buttons", reply_markup=keyboard("é" * 32))  # 64 bytes
    with pytest.raises(BadRequest, match=r"(?i)button_data_invalid"):
        await bot.send_message(42, "buttons", reply_markup=keyboard("x" * 65))
    with pytest.raises(BadRequest, match=r"(?i)button_data_invalid"):
        await bot.edit_message_text(
            "again", chat_id=42, message_id=sent.message_id, reply_markup=keyboard("é" * 33)
        )


def test_markup_parsers_return_visible_text() -> None:
    assert plain_from_html('<a href="https://x.test">link</a> &lt;3 &#33;') == "link <3 !"
    marked = r"*bold* _it_ __u__ ||sp|| `a.b` [t](https://x.test/a) 1\.5"
    assert plain_from_markdown_v2(marked) == "bold it u sp a.b t 1.5"
    assert plain_from_markdown_v2("> quoted\n```py\ncode.\n```") == " quoted\npy\ncode.\n"


async def test_wrong_token_is_rejected(tg: FakeTelegram) -> None:
    with pytest.raises(InvalidToken, match="rejected"):
        async with Bot("999:WRONG", base_url=tg.base_url):
            pass
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{tg.base_url}999:WRONG/getMe")
    assert response.status_code == 401
    assert response.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}


async def test_unknown_method_is_404_and_fail_next_injects_errors(
    tg: FakeTelegram, bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Without it PTB 22 warns (PTBDeprecationWarning) whenever RetryAfter.retry_after is read.
    monkeypatch.setenv("PTB_TIMEDELTA", "1")
    async with httpx.AsyncClient() as client:
        response = await client.post(f"{tg.base_url}{TOKEN}/sendTelepathy")
    assert response.json() == {"ok": False, "error_code": 404, "description": "Not Found"}
    tg.fail_next("sendMessage", error_code=403, description="Forbidden: bot was blocked by the user")
    with pytest.raises(Forbidden, match="blocked"):
        await bot.send_message(42, "hello?")
    tg.fail_next("sendMessage", error_code=429, description="Too Many Requests: retry after 3", retry_after=3)
    with pytest.raises(RetryAfter) as flood:
        await bot.send_message(42, "hello?")
    assert flood.value.retry_after == dt.timedelta(seconds=3)
    assert (await bot.send_message(42, "again")).text == "again"


def test_sync_use_and_clean_restart() -> None:
    for _ in range(2):
        with FakeTelegram() as fake:
            url = f"{fake.base_url}{fake.token}/sendMessage"
            response = httpx.post(url, data={"chat_id": "5", "text": "12"})
            assert response.json()["result"]["text"] == "12"
            assert fake.wait_sent(1, chat_id=5, timeout=1)[0].text == "12"
            with pytest.raises(AssertionError, match="waited for 2 messages"):
                fake.wait_sent(2, timeout=0.05)


async def test_entity_offsets_count_utf16_units(bot: Bot, tg: FakeTelegram) -> None:
    # "😀" is one Python character but two UTF-16 units: the text is 7 units long, "bold" is 3-7.
    await bot.send_message(42, "😀 bold", entities=[MessageEntity("bold", 3, 4)])
    with pytest.raises(BadRequest, match="outside the text"):
        await bot.send_message(42, "😀 bold", entities=[MessageEntity("bold", 3, 5)])
    with pytest.raises(BadRequest, match="nsupported entity type"):
        await bot.send_message(42, "hi", entities=[MessageEntity("shouting", 0, 2)])
    with pytest.raises(BadRequest, match=r"(?i)wrong http url"):
        await bot.send_message(42, "hi", entities=[MessageEntity("text_link", 0, 2, url="javascript:x")])
    assert [m.text for m in tg.messages_to(42)] == ["😀 bold"]


async def test_drafts_go_to_private_chats_only(bot: Bot, tg: FakeTelegram) -> None:
    assert await bot.send_message_draft(42, 7, "writing…", entities=[MessageEntity("italic", 0, 7)])
    assert await bot.send_message_draft(42, 7, "")  # the "Thinking..." placeholder
    with pytest.raises(BadRequest, match="private chats"):
        await bot.send_message_draft(-100, 7, "x")
    with pytest.raises(BadRequest, match="non-zero"):
        await bot.send_message_draft(42, 0, "x")
    assert [(d.draft_id, d.text) for d in tg.drafts] == [(7, "writing…"), (7, "")]
    assert tg.messages_to(42) == []  # a draft is never a message


async def test_a_stop_button_on_a_draft_sends_stopped_message_generation(bot: Bot, tg: FakeTelegram) -> None:
    stoppable = {"can_stop": True, "keep_on_stop": True}
    assert await bot.send_message_draft(42, 7, "writing…", api_kwargs=stoppable)
    assert await bot.send_message_draft(42, 8, "no button")
    with pytest.raises(BadRequest, match=r"(?i)must be boolean"):
        await bot.send_message_draft(42, 9, "x", api_kwargs={"can_stop": "yes"})
    shown = [(d.draft_id, d.can_stop, d.keep_on_stop) for d in tg.drafts]
    assert shown == [(7, True, True), (8, False, False)]
    # Only a draft shown with the button can be stopped, in its own chat.
    assert tg.stop_generation(42, 8) is None and tg.stop_generation(43, 7) is None
    assert tg.stop_generation(42, 7) is not None
    assert await bot.get_updates(timeout=0) == ()  # sent only when asked for
    [update] = await bot.get_updates(allowed_updates=["stopped_message_generation"], timeout=0)
    stopped = update.api_kwargs["stopped_message_generation"]
    assert stopped == {"chat": {"id": 42, "type": "private", "first_name": "User"}, "draft_id": 7}


async def test_get_file_then_download(bot: Bot, tg: FakeTelegram) -> None:
    update = tg.photo(42, content=b"\xff\xd8 jpeg bytes")
    large = update["message"]["photo"][-1]
    file = await bot.get_file(large["file_id"])
    assert file.file_size == len(b"\xff\xd8 jpeg bytes")
    assert bytes(await file.download_as_bytearray()) == b"\xff\xd8 jpeg bytes"
    with pytest.raises(BadRequest, match="nvalid file_id"):
        await bot.get_file("nope")


# Ephemeral messages (Bot API 10.2): python-telegram-bot knows none of their fields, which travel
# in api_kwargs both ways.
GROUP, ANA, BOB = -4021, 41, 42


async def set_group_menu(bot: Bot) -> None:
    """The groups' menu: /help ephemeral, /memory not."""
    await bot.set_my_commands(
        [BotCommand("help", "how", api_kwargs={"is_ephemeral": True}), BotCommand("memory", "what")],
        scope=BotCommandScopeAllGroupChats(),
    )


async def delivered(bot: Bot) -> Message:
    [update] = await bot.get_updates(timeout=1)
    await bot.get_updates(offset=update.update_id + 1)
    assert update.message is not None
    return update.message


async def test_an_ephemeral_command_and_its_answer_for_the_sender_alone(tg: FakeTelegram, bot: Bot) -> None:
    await set_group_menu(bot)
    assert tg.commands[("all_group_chats", "")][0] == {
        "command": "help",
        "description": "how",
        "is_ephemeral": True,
    }
    tg.group_command(GROUP, ANA, "/help", ephemeral=True)
    command = await delivered(bot)
    replied = command.api_kwargs["ephemeral_message_id"]
    assert isinstance(replied, int) and command.api_kwargs["receiver_user"]["id"] == bot.id
    answer = await bot.send_message(
        GROUP,
        "only you",
        api_kwargs={"receiver_user_id": ANA, "reply_parameters": {"ephemeral_message_id": replied}},
    )
    assert (
        answer.api_kwargs["receiver_user"]["id"] == ANA
        and answer.api_kwargs["ephemeral_message_id"] != replied
    )
    assert tg.messages_to(GROUP)[0].params["receiver_user_id"] == ANA
    # Bot API 10.3's spelling of the receiver is read too; the answer may only go to the command's sender.
    nested = {"ephemeral_message_parameters": {"receiver_user_id": ANA}}
    await bot.send_message(
        GROUP, "again", api_kwargs={**nested, "reply_parameters": {"ephemeral_message_id": replied}}
    )
    with pytest.raises(BadRequest, match="replied not found"):
        await bot.send_message(
            GROUP,
            "x",
            api_kwargs={"receiver_user_id": BOB, "reply_parameters": {"ephemeral_message_id": replied}},
        )
    with pytest.raises(BadRequest, match="needs a receiver"):
        await bot.send_message(GROUP, "x", api_kwargs={"reply_parameters": {"ephemeral_message_id": replied}})
    # Only a command the menu marks ephemeral can arrive as one.
    with pytest.raises(AssertionError, match="no ephemeral /memory"):
        tg.group_command(GROUP, ANA, "/memory", ephemeral=True)
    tg.group_command(GROUP, ANA, "/memory")
    assert "ephemeral_message_id" not in (await delivered(bot)).api_kwargs


async def test_a_server_before_ephemeral_messages_refuses_the_answer(tg: FakeTelegram, bot: Bot) -> None:
    await set_group_menu(bot)
    tg.ephemeral_sends = False
    tg.group_command(GROUP, ANA, "/help", ephemeral=True)
    replied = (await delivered(bot)).api_kwargs["ephemeral_message_id"]
    ephemeral = {"receiver_user_id": ANA, "reply_parameters": {"ephemeral_message_id": replied}}
    with pytest.raises(BadRequest, match='find field "message_id"'):
        await bot.send_message(GROUP, "only you", api_kwargs=ephemeral)
    assert tg.messages_to(GROUP) == []
    # The parameters it does not know are ignored: this message is for everyone.
    public = await bot.send_message(GROUP, "everyone", api_kwargs={"receiver_user_id": ANA})
    assert "receiver_user" not in public.api_kwargs
