"""A person brings their ChatGPT and Claude history, in the terminal chat (the offline demo model) and on
Telegram (the fake Bot API), then asks in a new conversation about what they told ChatGPT a year ago:
the bot finds it, dated by its own day; the regenerated answer is never stored nor found; the other
assistant's lines stay that assistant's; the same file again adds nothing."""

from __future__ import annotations

import io
import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import select

from agent.core.clock import ShiftedClock
from agent.core.models import build_model
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.cli.chat import run_chat
from bot.importing import NOTHING_NEW
from bot.runtime import Runtime, build_runtime
from db.models import ImportRun, User
from tests.assistant_exports import (
    ASSISTANT_CLAIM,
    CLAUDE_CLAIM,
    DOG,
    EDITED_AWAY,
    HIDDEN_SYSTEM,
    REGENERATED,
    SISTER,
    TOOL_OUTPUT,
    export_bytes,
    write_chatgpt_export,
    write_claude_export,
)
from tests.bot.conftest import running_bot
from tests.bot.test_chat import answers, morning_clock

ASK = "Do you remember what I told you about my dog Biscuit?"
LEFT_OUT = (REGENERATED, EDITED_AWAY, HIDDEN_SYSTEM, TOOL_OUTPUT)


def _rows(database: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(database) as db:
        return [(r, c) for r, c in db.execute("SELECT role, content FROM transcript_messages ORDER BY id")]


def _chat_settings(database: Path, tmp: Path) -> Settings:
    return Settings(
        database_url=f"sqlite+aiosqlite:///{database}",
        data_dir=str(tmp / "data"),
        model="demo",
        summary_model="demo",
        _env_file=None,
    )


async def _user_id(runtime: Runtime, telegram_id: int) -> int:
    async with runtime.sessions() as session:
        user = await session.scalar(select(User).where(User.telegram_id == telegram_id))
    assert user is not None
    return user.id


async def _chat(settings: Settings, clock: ShiftedClock, lines: list[str]) -> str:
    out = io.StringIO()
    stdin = io.StringIO("\n".join([*lines, "/quit"]) + "\n")
    await run_chat(settings, user_name="ana", stdin=stdin, stdout=out, clock=clock)
    return out.getvalue()


async def test_both_exports_in_the_terminal_chat_are_found_dated_by_their_own_day(tmp_path: Path) -> None:
    database = tmp_path / "chat.db"
    settings = _chat_settings(database, tmp_path)
    clock = morning_clock()
    chatgpt = write_chatgpt_export(tmp_path / "chatgpt-export.zip", clock.now())
    claude = write_claude_export(tmp_path / "conversations.json", clock.now(), zipped=False)
    out = await _chat(
        settings,
        clock,
        [f"/import {chatgpt}", f"/import {claude}", f"/import {chatgpt}", "/wait 20", ASK],
    )
    assert "This is a ChatGPT export: 2 conversations with 6 messages" in out
    assert "Done: I stored 2 conversations and 6 messages from ChatGPT" in out
    assert "Done: I stored 2 conversations and 4 messages from Claude" in out
    assert out.count(NOTHING_NEW) == 1  # the same file again
    [found] = answers(out)
    year_ago = (clock.now() - timedelta(days=365)).date().isoformat()
    assert found.startswith(f"(offline demo) I found this ({year_ago}): ") and "Biscuit is a beagle" in found
    rows = _rows(database)
    assert ("user", DOG) in rows and ("user", SISTER) in rows
    assert not any(gone in content for _, content in rows for gone in LEFT_OUT)
    assert {role for role, content in rows if ASSISTANT_CLAIM in content or CLAUDE_CLAIM in content} == {
        "other"
    }
    # Search itself never finds the regenerated answer (the tool's own call, outside the chat).
    runtime = await build_runtime(settings, clock=clock)
    try:
        assert runtime.recall is not None
        async with runtime.sessions() as session:
            user = await session.scalar(select(User).where(User.key == "cli:ana"))
        assert user is not None
        near = await runtime.recall.search(user.id, "Zebrafinch regenerated answer replaced", now=clock.now())
        assert not any("Zebrafinch" in (h.snippet or "") for h in near)  # vectors find neighbours, never it
        hits = await runtime.recall.search(user.id, "beagle thunderstorms", now=clock.now())
        assert hits and any(DOG in (h.snippet or "") for h in hits)
    finally:
        await runtime.close()


async def test_facts_come_from_the_person_lines_only(tmp_path: Path) -> None:
    database = tmp_path / "chat.db"
    settings = _chat_settings(database, tmp_path)
    clock = morning_clock()
    chatgpt = write_chatgpt_export(tmp_path / "chatgpt-export.zip", clock.now())
    claude = write_claude_export(tmp_path / "claude-export.zip", clock.now())
    out = await _chat(
        settings, clock, [f"/import {chatgpt}", f"/import {claude}", "/wait 20", "/wait 20", "/memory"]
    )
    facts = out.split("Here's what I remember about you.", 1)[-1]
    assert "Biscuit" in facts and "Marta" in facts  # what the person told the other assistants
    assert "lighthouse" not in facts and "pianist" not in facts  # what the assistants said of themselves


async def test_both_exports_on_telegram_are_found_in_a_new_conversation(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: object, tmp_path: Path
) -> None:
    settings = settings_factory(
        data_dir=str(tmp_path / "data"), onboarding_enabled=False, model="demo", summary_model="demo"
    )
    now = datetime.now(UTC)
    async with running_bot(settings, build_model("demo", settings)) as runtime:
        for source, name in (("chatgpt", "chatgpt-export.zip"), ("claude", "claude-export.zip")):
            tg.document(
                42, file_name=name, content=export_bytes(source, now, tmp_path), mime_type="application/zip"
            )
            sent = len(tg.messages_to(42))
            preview = (await tg.wait_for_messages(sent + 1, chat_id=42))[-1]
            markup = preview.params["reply_markup"]
            data = (markup if isinstance(markup, dict) else json.loads(markup))["inline_keyboard"][0][0][
                "callback_data"
            ]
            tg.push_update(
                {
                    "callback_query": {
                        "id": f"cb-{source}",
                        "from": {"id": 42, "is_bot": False, "first_name": "Alice"},
                        "chat_instance": "1",
                        "data": data,
                        "message": {
                            "message_id": preview.message_id,
                            "date": 0,
                            "chat": {"id": 42, "type": "private"},
                        },
                    }
                }
            )
            deadline = sent + 3  # the progress message and the last one
            texts = [m.text for m in await tg.wait_for_messages(deadline, chat_id=42, timeout=30)]
            assert any(t.startswith("Done: I stored 2 conversations") for t in texts[sent:]), texts
        tg.document(
            42,
            file_name="again.zip",
            content=export_bytes("chatgpt", now, tmp_path),
            mime_type="application/zip",
        )
        again = await tg.wait_for_messages(7, chat_id=42)
        assert again[-1].text == NOTHING_NEW
        tg.user_message(42, ASK)
        found = (await tg.wait_for_messages(8, chat_id=42, timeout=30))[-1].text
        # Dated by its own day, a year back: the tool's label for a message (weekday, how long ago).
        year_ago = (now - timedelta(days=365)).date()
        assert found.startswith(f"(offline demo) I found this ({year_ago:%A}, 12 months ago): ")
        assert "Biscuit is a beagle" in found
        assert runtime.recall is not None
        hits = await runtime.recall.search(await _user_id(runtime, 42), "beagle thunderstorms", now=now)
        assert hits[0].day_label == year_ago.isoformat()
        async with runtime.sessions() as session:
            stored = [r.status for r in await session.scalars(select(ImportRun).order_by(ImportRun.id))]
        assert stored == ["stored", "stored"]
