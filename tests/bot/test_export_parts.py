"""/export of a large user through Telegram: several documents, each under the part size
(and so under Telegram's 50 MB), that together hold every message."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import insert

from agent.core.settings import Settings
from bench.fakes.telegram_api import MAX_DOCUMENT_BYTES, FakeTelegram
from bot.app import build_application, running
from bot.handlers.commands import export_caption
from bot.runtime import build_runtime
from db.models import TranscriptMessage
from tests.agent.test_export import deep_merge
from tests.bot.conftest import Brain
from tests.bot.test_app import ALICE, onboard, user_row

PART_BYTES = 40_000


async def test_a_large_export_arrives_in_numbered_parts(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(export_part_bytes=PART_BYTES)
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    async with running(build_application(runtime, webhook=False), poll_timeout=1):
        await onboard(tg)
        user = await user_row(runtime, ALICE)
        assert user is not None
        at = datetime(2026, 1, 1, tzinfo=UTC)
        async with runtime.sessions() as session, session.begin():
            # One executemany rather than an object per row: the rows are the export's input.
            await session.execute(
                insert(TranscriptMessage),
                [
                    {
                        "user_id": user.id,
                        "role": "user",
                        "content": f"old note {n} " + "z" * 150,
                        "sent_at": at + timedelta(minutes=n),
                    }
                    for n in range(1500)
                ],
            )
        tg.command(ALICE, "/export")
        tg.command(ALICE, "/timezone")  # answered after the export: one person's updates keep their order
        await tg.wait_for_messages(5, chat_id=ALICE)
        total = len(tg.calls_to("sendDocument"))
    assert total >= 5
    merged: dict[str, Any] = {}
    for number, document in enumerate(tg.documents, start=1):
        assert len(document.content) <= PART_BYTES < MAX_DOCUMENT_BYTES
        assert document.filename == f"nikita-export-{number}-of-{total}.json"
        assert document.caption == export_caption(number, total)
        part = json.loads(document.content)
        assert part.pop("export")["part"] == number
        deep_merge(merged, part)
    notes = [m["content"] for m in merged["messages"] if m["content"].startswith("old note")]
    assert len(notes) == 1500 and merged["user"]["name"] == "Sam"
    assert merged["messages"][0]["content"] == "/start"
