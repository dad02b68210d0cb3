"""Importing an export: preview, store, resume, idempotency, the lease, and what search finds at once."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.imports import (
    ImportBusyError,
    ImportProgress,
    begin_import,
    cancel_import,
    preview_import,
    run_import,
)
from agent.account.users import get_or_create_user
from agent.core.clock import Clock, local_day
from agent.core.settings import Settings
from agent.search.recall import Recall
from agent.search.recall_index import CATCH_UP_SLICE
from bench.clock import FrozenClock
from bench.import_data import ExportShape, write_export
from bench.start_data import RandomVectors
from db.models import IMPORTED_DAY, Conversation, DaySegment, ImportRun, SearchChunk, TranscriptMessage
from db.models.conversations import IMPORT_WAITING, OTHER

SETTINGS = Settings(_env_file=None, summary_model="anthropic:claude-haiku-4-5")  # type: ignore[call-arg]
SHAPE = ExportShape(conversations=12, messages_per_conversation=6)


async def _person(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, key: str = "telegram:1"
) -> int:
    user, _ = await get_or_create_user(sessions, key=key, now=clock.now(), timezone="Europe/Berlin")
    return user.id


async def _import(
    sessions: async_sessionmaker[AsyncSession], user_id: int, path: Path, clock: Clock, worker: str = "w1"
) -> tuple[int, int]:
    preview = await preview_import(sessions, user_id, path, timezone="Europe/Berlin", settings=SETTINGS)
    run_id = await begin_import(
        sessions, user_id, path, preview, file_name=path.name, file_ref=None, now=clock.now()
    )
    result = await run_import(sessions, run_id, path, clock=clock, worker_id=worker, settings=SETTINGS)
    return run_id, result.messages


async def full_text_hits(session: AsyncSession, word: str) -> int:
    """Messages of anyone whose full-text index holds the word (FTS5 on SQLite, tsvector on PostgreSQL)."""
    if session.bind.dialect.name == "sqlite":
        stmt = text("SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH :word")
    else:
        stmt = text(
            "SELECT count(*) FROM transcript_messages WHERE search_tsv @@ plainto_tsquery('simple', :word)"
        )
    return int((await session.execute(stmt, {"word": word})).scalar() or 0)


async def _count(sessions: async_sessionmaker[AsyncSession], model: type, *where: object) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


@pytest.mark.both_databases
@pytest.mark.parametrize("kind", ["chatgpt", "claude"])
async def test_an_export_is_stored_once_whole_and_searchable_at_once(
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tmp_path: Path,
    kind: str,
    database_url: str,
) -> None:
    user_id = await _person(sessions, clock)
    path = write_export(tmp_path / "export.zip", kind, SHAPE, zipped=True)  # type: ignore[arg-type]

    preview = await preview_import(sessions, user_id, path, timezone="Europe/Berlin", settings=SETTINGS)
    assert (preview.source, preview.conversations, preview.messages, preview.skipped) == (kind, 12, 72, 0)
    assert preview.already == 0 and preview.model_calls == 12 + preview.days
    assert preview.first_at == datetime(2024, 3, 1, 9, 0, tzinfo=UTC)
    assert preview.dollars is not None and preview.dollars > 0
    assert await _count(sessions, TranscriptMessage) == 0  # a preview stores nothing

    run_id = await begin_import(
        sessions, user_id, path, preview, file_name="export.zip", file_ref=None, now=clock.now()
    )
    seen: list[ImportProgress] = []

    async def progress(step: ImportProgress) -> None:
        seen.append(step)

    result = await run_import(
        sessions,
        run_id,
        path,
        clock=clock,
        worker_id="w1",
        progress=progress,
        progress_every=5,
        settings=SETTINGS,
    )
    assert (result.conversations, result.messages) == (12, 72)
    assert [step.conversations_done for step in seen] == [5, 10, 12]
    assert (
        await _count(sessions, Conversation, Conversation.status == IMPORT_WAITING, Conversation.kind == kind)
        == 12
    )
    assert await _count(sessions, TranscriptMessage, TranscriptMessage.role == OTHER) == 36
    assert await _count(sessions, TranscriptMessage, TranscriptMessage.day_segment_id.is_(None)) == 0
    assert await _count(sessions, TranscriptMessage, TranscriptMessage.content.like("%regenerated%")) == 0
    async with sessions() as session:
        run = await session.get(ImportRun, run_id)
        assert run is not None and (run.status, run.messages_stored, run.conversations_stored) == (
            "stored",
            72,
            12,
        )
        segments = (await session.execute(select(func.sum(DaySegment.message_count)))).scalar()
        assert segments == 72
        # The other assistant's line is found by full text at once, as the person's.
        assert await full_text_hits(session, "c3m1") == 1

    # The same file again: the same run, nothing added.
    again, added = await _import(sessions, user_id, path, clock)
    assert (again, added) == (run_id, 0)
    assert await _count(sessions, TranscriptMessage) == 72


async def test_a_grown_conversation_gains_only_its_new_lines(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user_id = await _person(sessions, clock)
    old = write_export(tmp_path / "old.json", "claude", ExportShape(3, 4))
    await _import(sessions, user_id, old, clock)
    document = json.loads(old.read_text())
    extra = dict(
        document[1]["chat_messages"][-1], uuid="late", created_at="2030-01-01T10:00:00Z", text="late news"
    )
    extra["content"] = [{"type": "text", "text": "late news"}]
    document[1]["chat_messages"].append(extra)
    new = tmp_path / "new.json"
    new.write_text(json.dumps(document))

    preview = await preview_import(sessions, user_id, new, timezone="UTC", settings=SETTINGS)
    assert (preview.messages, preview.already, preview.model_calls) == (13, 12, 2)
    _, added = await _import(sessions, user_id, new, clock)
    assert added == 1
    assert await _count(sessions, Conversation) == 3
    async with sessions() as session:
        grown = (
            await session.execute(
                select(Conversation).where(Conversation.external_id == "claude:claude-000001")
            )
        ).scalar_one()
        assert grown.message_count == 5


async def test_a_run_held_by_a_live_lease_is_refused_and_a_cancelled_one_stops(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user_id = await _person(sessions, clock)
    path = write_export(tmp_path / "c.json", "chatgpt", SHAPE)
    preview = await preview_import(sessions, user_id, path, timezone="UTC", settings=SETTINGS)
    run_id = await begin_import(
        sessions, user_id, path, preview, file_name=None, file_ref=None, now=clock.now()
    )
    async with sessions() as session, session.begin():
        run = await session.get(ImportRun, run_id)
        assert run is not None
        run.status, run.claimed_by, run.claimed_at = "running", "other", clock.now()
    with pytest.raises(ImportBusyError):
        await run_import(sessions, run_id, path, clock=clock, worker_id="w1", settings=SETTINGS)
    assert await cancel_import(sessions, user_id, run_id)
    result = await run_import(sessions, run_id, path, clock=clock, worker_id="w1", settings=SETTINGS)
    assert result.messages == 0 and await _count(sessions, TranscriptMessage) == 0
    assert not await cancel_import(sessions, user_id + 1, run_id)


async def test_vectors_catch_up_on_an_imported_history_in_passes_and_stop_between_them(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user_id = await _person(sessions, clock)
    settings = Settings(_env_file=None)  # type: ignore[call-arg]
    recall = Recall(settings=settings, sessions=sessions, dialect="sqlite", embedder=RandomVectors())
    assert (
        await recall.index_quietly(user_id, now=clock.now())
    ) is not None  # nothing yet: the marker is kept

    # The imported lines are older than anything live; the index still sees them as new.
    await _import(sessions, user_id, write_export(tmp_path / "a.json", "claude", ExportShape(30, 20)), clock)
    stats = await recall.index_quietly(user_id, now=clock.now())
    assert stats is not None and not stats.more
    # Several passes: each re-reads the day's unfinished last chunk of the one before.
    assert stats.messages > 600 > CATCH_UP_SLICE
    async with sessions() as session:
        chunked = {
            i for ids in (await session.execute(select(SearchChunk.message_ids))).scalars() for i in ids
        }
        stored = set((await session.execute(select(TranscriptMessage.id))).scalars())
    assert chunked == stored and len(stored) == 600

    await _import(sessions, user_id, write_export(tmp_path / "b.json", "chatgpt", ExportShape(30, 20)), clock)
    recall.stop()
    stats = await recall.index_quietly(user_id, now=clock.now())
    # One pass (its slice, and the unfinished chunk it rebuilt), not the 600 new lines.
    assert stats is not None and stats.more and CATCH_UP_SLICE <= stats.messages < 2 * CATCH_UP_SLICE


@pytest.mark.both_databases
async def test_the_past_days_an_import_brings_wait_for_its_own_summaries(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user_id = await _person(sessions, clock)
    path = write_export(tmp_path / "export.json", "chatgpt", SHAPE, zipped=False)
    preview = await preview_import(sessions, user_id, path, timezone="Europe/Berlin", settings=SETTINGS)
    assert preview.first_at is not None
    first_day = local_day(preview.first_at, "Europe/Berlin")
    today = local_day(clock.now(), "Europe/Berlin")
    assert first_day < today
    async with sessions() as session, session.begin():
        # A day the companion already talked and summarised: the lines it gains make it wait again.
        session.add(
            DaySegment(
                user_id=user_id,
                day=first_day,
                timezone="Europe/Berlin",
                first_message_at=preview.first_at,
                last_message_at=preview.first_at,
                summary="We talked about the weather.",
                status="final",
            )
        )
    await _import(sessions, user_id, path, clock)
    async with sessions() as session:
        days = (
            await session.execute(
                select(DaySegment.day, DaySegment.status).where(DaySegment.user_id == user_id)
            )
        ).all()
    assert len(days) > 1
    # Left to the import's own post-processing, never to the nightly summaries, unpaced.
    assert {status for day, status in days if day < today} == {IMPORTED_DAY}
