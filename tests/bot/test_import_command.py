"""`python -m bot import`: real processes, one killed with SIGKILL mid-import and run again."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.import_data import ExportShape, write_export
from db.models import Conversation, ImportRun, TranscriptMessage, User

pytestmark = [pytest.mark.slow, pytest.mark.process]

# Enough that the import is far from its end when the test kills it (after 30 conversations).
SHAPE = ExportShape(conversations=150, messages_per_conversation=20)


def _command(database_url: str, cwd: Path, *arguments: str, **extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "LOG_LEVEL": "WARNING", **extra}
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "import", *arguments],
        cwd=cwd,  # no .env from the checkout
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _scalar(sessions: async_sessionmaker[AsyncSession], stmt: object) -> int:
    async with sessions() as session:
        return int(await session.scalar(stmt) or 0)  # type: ignore[call-overload]


@pytest.mark.both_databases
async def test_an_import_killed_midway_resumes_with_every_message_once(
    database_url: str, sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    export = write_export(tmp_path / "export.zip", "chatgpt", SHAPE, zipped=True)
    expected = SHAPE.conversations * SHAPE.messages_per_conversation

    first = _command(database_url, tmp_path, str(export), "--user", "4242")
    stored = 0
    deadline = time.monotonic() + 120
    while stored < 30 and first.poll() is None and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        stored = await _scalar(sessions, select(func.coalesce(func.max(ImportRun.conversations_stored), 0)))
    assert first.poll() is None, first.communicate()
    first.send_signal(signal.SIGKILL)
    first.wait(30)
    killed_at = await _scalar(sessions, select(func.count(TranscriptMessage.id)))
    assert 0 < killed_at < expected
    # Whole conversations only: the one being stored at the kill was rolled back.
    assert killed_at % SHAPE.messages_per_conversation == 0

    rerun = _command(database_url, tmp_path, str(export), "--user", "4242", IMPORT_LEASE_SECONDS="0")
    out, err = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, err
    assert f"imported {expected - killed_at:,} new messages" in out

    again = _command(database_url, tmp_path, str(export), "--user", "4242")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert "imported 0 new messages" in out

    assert await _scalar(sessions, select(func.count(TranscriptMessage.id))) == expected
    distinct = select(func.count()).select_from(
        select(TranscriptMessage.conversation_id, TranscriptMessage.content).distinct().subquery()
    )
    assert await _scalar(sessions, distinct) == expected
    assert await _scalar(sessions, select(func.count(Conversation.id))) == SHAPE.conversations
    assert await _scalar(sessions, select(func.count(ImportRun.id))) == 1
    async with sessions() as session:
        run = (await session.execute(select(ImportRun))).scalar_one()
        assert (run.status, run.messages_stored, run.conversations_stored) == (
            "stored",
            expected,
            SHAPE.conversations,
        )
        user = (await session.execute(select(User))).scalar_one()
        assert (user.key, user.telegram_id) == ("telegram:4242", 4242)


async def test_a_dry_run_says_what_the_file_holds_and_stores_nothing(
    database_url: str, sessions: async_sessionmaker[AsyncSession], tmp_path: Path
) -> None:
    export = write_export(tmp_path / "conversations.json", "claude", ExportShape(5, 4))
    dry = _command(database_url, tmp_path, str(export), "--user", "7", "--dry-run")
    out, err = dry.communicate(timeout=120)
    assert dry.returncode == 0, err
    assert "Claude export: 5 conversations, 20 messages" in out and "nothing stored" in out
    assert await _scalar(sessions, select(func.count(User.id))) == 0

    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "an export"}')
    refused = _command(database_url, tmp_path, str(bad), "--user", "7")
    out, err = refused.communicate(timeout=120)
    assert refused.returncode == 1
    assert "not imported: This file is neither a ChatGPT nor a Claude export." in err
    assert await _scalar(sessions, select(func.count(ImportRun.id))) == 0
