"""An import is the person's alone: /export shows it, /forget removes all of it, and it never reaches
another person or a group."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import export_user, forget_user
from agent.account.imports import ImportFileError, begin_import, preview_import, run_import
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.search.recall import Recall
from bench.clock import FrozenClock
from bench.import_data import ExportShape, write_export
from db.models import Conversation, DaySegment, ImportRun, TranscriptMessage
from db.models.conversations import OTHER
from db.repositories.users import UserRepository
from tests.agent.test_imports import full_text_hits

SETTINGS = Settings(_env_file=None, embedder="none")  # type: ignore[call-arg]


async def _imported(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, path: Path, key: str
) -> tuple[int, int]:
    user, _ = await get_or_create_user(sessions, key=key, now=clock.now(), timezone="UTC")
    preview = await preview_import(sessions, user.id, path, timezone="UTC", settings=SETTINGS)
    run_id = await begin_import(
        sessions, user.id, path, preview, file_name=None, file_ref=None, now=clock.now()
    )
    await run_import(sessions, run_id, path, clock=clock, worker_id="w", settings=SETTINGS)
    return user.id, run_id


async def _rows(sessions: async_sessionmaker[AsyncSession], model: type, user_id: int) -> int:
    async with sessions() as session:
        stmt = select(func.count()).select_from(model).where(model.user_id == user_id)  # type: ignore[attr-defined]
        return int(await session.scalar(stmt) or 0)


@pytest.mark.both_databases
async def test_export_holds_the_import_and_forget_removes_all_of_it(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    path = write_export(tmp_path / "c.json", "claude", ExportShape(4, 6))
    user_id, run_id = await _imported(sessions, clock, path, "telegram:5")
    other_id, _ = await _imported(sessions, clock, path, "telegram:6")

    document = await export_user(sessions, user_id)
    assert [(run["id"], run["source"], run["messages_stored"]) for run in document["imports"]] == [
        (run_id, "claude", 24)
    ]
    imported = [c for c in document["conversations"] if c["kind"] == "claude"]
    assert len(imported) == 4 and {c["import_id"] for c in imported} == {run_id}
    assert {m["role"] for m in document["messages"]} == {"user", OTHER}
    assert {m["kind"] for m in document["messages"]} == {"imported"}
    assert datetime.fromisoformat(document["messages"][0]["sent_at"]).year == 2024

    assert (await forget_user(sessions, user_id, now=clock.now())).found
    for model in (ImportRun, Conversation, TranscriptMessage, DaySegment):
        assert await _rows(sessions, model, user_id) == 0
    assert await _rows(sessions, TranscriptMessage, other_id) == 24  # the other person's copy stays
    async with sessions() as session:
        assert await full_text_hits(session, "c1m1") == 1  # only the other person's line


async def test_one_persons_import_never_reaches_another_person_or_a_group(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    path = write_export(tmp_path / "c.json", "chatgpt", ExportShape(3, 4))
    owner_id, _ = await _imported(sessions, clock, path, "telegram:8")
    stranger, _ = await get_or_create_user(sessions, key="telegram:9", now=clock.now(), timezone="UTC")
    async with sessions() as session, session.begin():
        group = await UserRepository(session).create(
            key="group:-100", created_at=clock.now(), timezone="UTC", kind="group", chat_id=-100
        )
    recall = Recall(settings=SETTINGS, sessions=sessions, dialect="sqlite", embedder=None)

    assert [hit.message_id for hit in await recall.search(owner_id, "c1m2", now=clock.now())]
    assert await recall.search(stranger.id, "c1m2", now=clock.now()) == []
    assert await recall.search(group.id, "c1m2", now=clock.now()) == []

    with pytest.raises(ImportFileError, match="private chat only"):
        await preview_import(sessions, group.id, path, timezone="UTC", settings=SETTINGS)
    preview = await preview_import(sessions, owner_id, path, timezone="UTC", settings=SETTINGS)
    with pytest.raises(ImportFileError, match="private chat only"):
        await begin_import(sessions, group.id, path, preview, file_name=None, file_ref=None, now=clock.now())
    assert await _rows(sessions, ImportRun, group.id) == 0
    assert await _rows(sessions, TranscriptMessage, group.id) == 0
