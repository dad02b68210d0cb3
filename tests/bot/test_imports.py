"""A ChatGPT or Claude export sent in Telegram: previewed with nothing stored, imported in the
background on the sender's Import press (the chat answering meanwhile), cancelled, refused with the
reason, sent to the upload page past 20 MB, ignored in a group, resumed after a restart.
python-telegram-bot against the fake Bot API, a scripted model, a real database."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from agent.account.imports import begin_import, preview_import
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.telegram_webapp import sign_init_data
from bot.app import AnyApplication, build_application, running
from bot.handlers.imports import ALREADY, CANCELLED, GONE, NOT_YOURS, TOO_BIG, UPLOAD_BUTTON
from bot.runtime import Runtime
from bot.web.serve import build_pages_app
from db.models import Conversation, ImportRun, TranscriptMessage, User
from tests.assistant_exports import (
    ASSISTANT_CLAIM,
    DOG,
    REGENERATED,
    chatgpt_conversations,
    export_bytes,
    padded,
    write_chatgpt_export,
)
from tests.bot.conftest import TOKEN, Brain

ALICE = 42
BOB = 43
GROUP = -1001


@pytest.fixture
def settings(settings_factory: Callable[..., Settings], tmp_path: Path) -> Settings:
    return settings_factory(
        data_dir=str(tmp_path / "data"),
        webapp_url="https://example.org/timeline",
        groups_enabled=True,
        onboarding_enabled=False,
        import_lease_seconds=2,
    )


def press(
    tg: FakeTelegram, data: str, message_id: int, *, presser: int = ALICE, chat: int | None = None
) -> None:
    """A press of an inline button under the bot's message `message_id`."""
    chat_id = presser if chat is None else chat
    tg.push_update(
        {
            "callback_query": {
                "id": f"cb-{data}-{presser}-{message_id}",
                "from": {"id": presser, "is_bot": False, "first_name": "Someone"},
                "chat_instance": "1",
                "data": data,
                "message": {
                    "message_id": message_id,
                    "date": 0,
                    "chat": {"id": chat_id, "type": "private", "first_name": "Someone"},
                    "text": "preview",
                },
            }
        }
    )


def buttons(message: Any) -> list[str]:
    """The callback data of a sent message's inline buttons."""
    markup = message.params.get("reply_markup") or {}
    if isinstance(markup, str):
        markup = json.loads(markup)
    return [
        b.get("callback_data") or b.get("web_app", {}).get("url")
        for row in markup.get("inline_keyboard", [])
        for b in row
    ]


async def callback_answers(tg: FakeTelegram, n: int) -> list[str]:
    """The texts of the first `n` answerCallbackQuery calls."""
    calls = await tg.wait_for_calls("answerCallbackQuery", n)
    return [str(call.params.get("text", "")) for call in calls]


async def count(runtime: Runtime, model: Any) -> int:
    async with runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def runs(runtime: Runtime) -> list[ImportRun]:
    async with runtime.sessions() as session:
        return list(await session.scalars(select(ImportRun).order_by(ImportRun.id)))


async def interrupted_run(
    runtime: Runtime, user_id: int, path: Path, *, file_ref: str, claimed_at: datetime
) -> int:
    """A run of `path` left `running` by a process that is gone (its lease taken at `claimed_at`)."""
    preview = await preview_import(runtime.sessions, user_id, path, timezone="UTC", settings=runtime.settings)
    import_id = await begin_import(
        runtime.sessions,
        user_id,
        path,
        preview,
        file_name=path.name,
        file_ref=file_ref,
        chat_id=ALICE,
        now=claimed_at,
    )
    async with runtime.sessions() as session, session.begin():
        run = await session.get(ImportRun, import_id)
        assert run is not None
        run.status, run.claimed_by, run.claimed_at = "running", "a-process-gone", claimed_at
    return import_id


async def test_an_export_is_previewed_then_imported_while_the_chat_goes_on(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, brain: Brain, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    talks = padded(chatgpt_conversations(now), count=600, now=now)
    content = write_chatgpt_export(tmp_path / "chatgpt.zip", now, talks=talks).read_bytes()
    tg.document(ALICE, file_name="chatgpt-export.zip", content=content, mime_type="application/zip")
    [preview] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert preview.text.startswith("This is a ChatGPT export: 602 conversations with 2,406 messages, from ")
    assert "model call" in preview.text and "tokens" in preview.text
    [run] = await runs(runtime)
    assert buttons(preview) == [f"import:go:{run.id}", f"import:no:{run.id}"]
    # Read, not stored: no conversation, no line, and the file kept under the data folder alone.
    assert run.status == "previewed" and await count(runtime, TranscriptMessage) == 0
    assert [p.name for p in (tmp_path / "data" / "imports").iterdir()] == [f"{run.id}.zip"]

    press(tg, f"import:go:{run.id}", preview.message_id)
    tg.user_message(ALICE, "are you still there?")
    replies = await tg.wait_for_messages(4, chat_id=ALICE, timeout=60)
    texts = [m.text for m in replies]
    done = next(i for i, text in enumerate(texts) if text.startswith("Done: I stored"))
    # The chat answered while the import ran: the reply came before the last message.
    assert texts.index("echo: are you still there?") < done
    assert texts[done].startswith("Done: I stored 602 conversations and 2,406 messages from ChatGPT")
    assert "in the background" in texts[done]
    [progress] = [text for text in tg.chat_view(ALICE) if text.startswith("Importing")]
    assert progress.startswith("Importing your ChatGPT history… 602 of 602 conversations")
    assert await count(runtime, TranscriptMessage) == 2406 + 2  # the import, and the chat's own turn
    # Pressed again: nothing imported twice.
    press(tg, f"import:go:{run.id}", preview.message_id)
    answers = await callback_answers(tg, 2)
    assert answers[1] == ALREADY
    assert await count(runtime, TranscriptMessage) == 2406 + 2
    [run] = await runs(runtime)
    assert run.status == "stored" and not (tmp_path / "data" / "imports" / f"{run.id}.zip").exists()


async def test_only_the_sender_can_press_and_cancel_stores_nothing(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    content = export_bytes("claude", now, tmp_path, zipped=False)
    tg.document(ALICE, file_name="conversations.json", content=content, mime_type="application/json")
    [preview] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert preview.text.startswith("This is a Claude export: 2 conversations with 4 messages")
    [run] = await runs(runtime)
    tg.user_message(BOB, "hi")  # Bob has an account of his own
    await tg.wait_for_messages(1, chat_id=BOB)
    # Bob, with Alice's button data, in his own chat; and Alice's data pressed in Bob's name in hers.
    press(tg, f"import:go:{run.id}", preview.message_id, presser=BOB)
    press(tg, f"import:go:{run.id}", preview.message_id, presser=BOB, chat=ALICE)
    assert sorted(await callback_answers(tg, 2)) == sorted([GONE, NOT_YOURS])  # another's run: as if missing
    assert (await runs(runtime))[0].status == "previewed"
    press(tg, f"import:no:{run.id}", preview.message_id)
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[1].text == CANCELLED
    edits = await tg.wait_for_calls("editMessageReplyMarkup", 1)
    assert edits[0].params["message_id"] == preview.message_id  # the buttons are gone
    [run] = await runs(runtime)
    assert run.status == "cancelled"
    assert await count(runtime, Conversation) == 1  # Bob's "hi" alone
    assert list((tmp_path / "data" / "imports").iterdir()) == []


async def test_a_bad_export_gets_the_reason_and_an_ordinary_json_is_read(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, brain: Brain
) -> None:
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("photos/cat.jpg", b"\xff\xd8 not an export")
    tg.document(ALICE, file_name="holiday.zip", content=archive.getvalue(), mime_type="application/zip")
    [refused] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert "conversations.json" in refused.text
    assert await runs(runtime) == [] and await count(runtime, TranscriptMessage) == 0
    tg.document(ALICE, file_name="settings.json", content=b'{"theme": "dark"}', mime_type="application/json")
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[1].text.startswith("echo:")  # the document path: the model read it
    assert await runs(runtime) == []


async def test_a_file_over_the_download_limit_gets_the_upload_page(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram
) -> None:
    tg.document(
        ALICE,
        file_name="chatgpt-export.zip",
        content=b"PK" + b"\0" * (20 * 1024 * 1024),
        mime_type="application/zip",
    )
    [answer] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert answer.text == TOO_BIG
    markup = answer.params["reply_markup"]
    [[button]] = (markup if isinstance(markup, dict) else json.loads(markup))["inline_keyboard"]
    assert button["text"] == UPLOAD_BUTTON
    assert buttons(answer) == ["https://example.org/timeline?import=1"]
    assert tg.calls_to("getFile") == [] and await runs(runtime) == []


async def test_in_a_group_an_export_is_never_downloaded(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    content = export_bytes("chatgpt", datetime.now(UTC), tmp_path)
    doc = {
        "file_id": "group-export",
        "file_unique_id": "u-group-export",
        "file_name": "chatgpt.zip",
        "file_size": len(content),
    }
    tg.keep_file(doc, content)
    tg.group_message(GROUP, ALICE, document=doc, caption="my history")
    tg.mention(GROUP, ALICE, "hello")
    await tg.wait_for_messages(1, chat_id=GROUP)
    assert tg.calls_to("getFile") == [] and await runs(runtime) == []
    assert tg.messages_to(ALICE) == []


async def test_an_interrupted_import_resumes_at_start_from_telegram(
    runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    path = write_chatgpt_export(tmp_path / "chatgpt.zip", now)
    tg.keep_file({"file_id": "kept-export"}, path.read_bytes())
    async with runtime.sessions() as session, session.begin():
        user = User(
            telegram_id=ALICE,
            key=f"telegram:{ALICE}",
            timezone="UTC",
            created_at=now,
            onboarding_status="complete",
        )
        session.add(user)
    await interrupted_run(
        runtime, user.id, path, file_ref="telegram:kept-export", claimed_at=now - timedelta(hours=1)
    )
    path.unlink()  # only Telegram has it now
    # Exports a stop left half received: an old one is deleted at start, one being received now stays.
    folder = Path(runtime.settings.data_dir) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "incoming-old.part").write_bytes(b"PK")
    os.utime(folder / "incoming-old.part", (0, 0))
    (folder / "incoming-new.part").write_bytes(b"PK")
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        messages = await tg.wait_for_messages(2, chat_id=ALICE, timeout=30)
    assert messages[-1].text.startswith("Done: I stored 2 conversations and 6 messages from ChatGPT")
    assert tg.calls_to("getFile")[0].params["file_id"] == "kept-export"
    [run] = await runs(runtime)
    assert run.status == "stored" and run.messages_stored == 6
    assert sorted(p.name for p in folder.iterdir()) == ["incoming-new.part"]
    # The regenerated answer is off the conversation's path: never stored, never found.
    async with runtime.sessions() as session:
        said = [
            (r, c)
            for r, c in await session.execute(select(TranscriptMessage.role, TranscriptMessage.content))
        ]
    assert ("user", DOG) in said and not any(REGENERATED in c for _, c in said)
    assert all(role == "other" for role, c in said if ASSISTANT_CLAIM in c)


async def test_import_pressed_where_the_file_is_gone_downloads_it_again(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    tg.document(ALICE, file_name="claude.zip", content=export_bytes("claude", datetime.now(UTC), tmp_path))
    [preview] = await tg.wait_for_messages(1, chat_id=ALICE)
    [run] = await runs(runtime)
    # Another instance read it, or the data folder was emptied: only Telegram has the file now.
    (tmp_path / "data" / "imports" / f"{run.id}.zip").unlink()
    press(tg, f"import:go:{run.id}", preview.message_id)
    replies = await tg.wait_for_messages(3, chat_id=ALICE, timeout=30)
    assert replies[-1].text.startswith("Done: I stored 2 conversations and 4 messages from Claude")
    assert len(tg.calls_to("getFile")) == 2


async def test_an_upload_on_the_page_is_told_in_the_chat_when_the_bot_serves_it(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    tg.user_message(ALICE, "hi")  # she has an account
    await tg.wait_for_messages(1, chat_id=ALICE)
    signed = sign_init_data(TOKEN, user={"id": ALICE, "first_name": "Alice"}, auth_date=int(time.time()))
    transport = httpx.ASGITransport(app=build_pages_app(runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        headers = {"Authorization": f"tma {signed}"}
        body = export_bytes("chatgpt", datetime.now(UTC), tmp_path)
        preview = (await http.post("/timeline/api/imports", content=body, headers=headers)).json()
        started = await http.post(f"/timeline/api/imports/{preview['import_id']}/start", headers=headers)
        assert started.status_code == 200
    replies = await tg.wait_for_messages(3, chat_id=ALICE, timeout=30)
    assert replies[1].text.startswith("Importing your ChatGPT history…")
    assert replies[2].text.startswith("Done: I stored 2 conversations and 6 messages from ChatGPT")


async def test_a_run_another_process_left_is_resumed_while_the_bot_runs(
    app: AnyApplication, runtime: Runtime, tg: FakeTelegram, tmp_path: Path
) -> None:
    now = datetime.now(UTC)
    tg.user_message(ALICE, "hi")
    await tg.wait_for_messages(1, chat_id=ALICE)
    path = write_chatgpt_export(tmp_path / "uploaded.zip", now)  # a web process's upload, by path
    async with runtime.sessions() as session:
        user = await session.scalar(select(User).where(User.telegram_id == ALICE))
    assert user is not None
    await interrupted_run(runtime, user.id, path, file_ref=str(path), claimed_at=now)
    # Its lease (two seconds here) lapses; the bot's next look takes the run over from the same file.
    messages = await tg.wait_for_messages(3, chat_id=ALICE, timeout=30)
    assert messages[-1].text.startswith("Done: I stored 2 conversations and 6 messages from ChatGPT")
    assert tg.calls_to("getFile") == []
