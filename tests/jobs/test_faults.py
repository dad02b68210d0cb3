"""Fault tests with real worker processes (`python -m bot jobs run postprocess`) and a fake Anthropic API."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import distinct, func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from bench.clock import FrozenClock
from bench.fakes.anthropic_api import FakeAnthropic, Reply, last_user_text
from db.models import Conversation, ConversationThread, DaySegment, Thought, TranscriptMessage, UserFact
from tests.jobs.conftest import MARKER, extraction_reply, seed_conversation, sourced, summary_reply

pytestmark = [pytest.mark.slow, pytest.mark.both_databases, pytest.mark.process]


class Scripted:
    """The fake API's behaviour: structured answers for both agents; can block the day-summary call."""

    def __init__(self) -> None:
        self.extractions: Counter[int] = Counter()
        self.block_summaries = False
        self.summary_started = threading.Event()
        self.release = threading.Event()
        self.lock = threading.Lock()
        # When given, every answer waits for it (the two workers' test: until both hold a claim).
        self.hold: threading.Event | None = None

    def __call__(self, body: dict[str, Any]) -> Reply:
        if self.hold is not None:
            self.hold.wait(120)
        tool = body["tools"][0]
        if "user_facts" in tool["input_schema"]["properties"]:
            marker = MARKER.search(last_user_text(body))
            with self.lock:
                self.extractions[int(marker.group(1)) if marker else -1] += 1
            return Reply.tool_call(tool["name"], sourced(extraction_reply(), last_user_text(body)))
        if self.block_summaries:
            self.summary_started.set()
            self.release.wait(30)  # the worker is killed while it waits for this answer
        return Reply.tool_call(tool["name"], summary_reply())


@pytest.fixture
def fake() -> Iterator[tuple[FakeAnthropic, Scripted]]:
    """A fake Anthropic API answering with the scripted behaviour."""
    scripted = Scripted()
    with FakeAnthropic(responder=scripted) as server:
        yield server, scripted
    scripted.release.set()
    if scripted.hold is not None:
        scripted.hold.set()


# Conversations of twenty people for the two workers (each takes a share: the first answers wait
# until both hold a claim).
CONVERSATIONS = 100


def _worker(database_url: str, base_url: str, cwd: Path, **extra: str) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "SUMMARY_MODEL": "anthropic:claude-haiku-4-5",
        "MODEL": "test",
        "ANTHROPIC_API_KEY": "sk-fake",
        "ANTHROPIC_BASE_URL": base_url,
        "LOG_LEVEL": "WARNING",
        **extra,
    }
    return subprocess.Popen(
        [sys.executable, "-m", "bot", "jobs", "run", "postprocess"],
        cwd=cwd,  # no .env from the checkout
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _count(sessions: async_sessionmaker[AsyncSession], model: type, *where: Any) -> int:
    async with sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model).where(*where)) or 0)


async def _count_claimers(sessions: async_sessionmaker[AsyncSession]) -> int:
    async with sessions() as session:
        return int(
            await session.scalar(
                select(func.count(distinct(Conversation.claimed_by))).where(
                    Conversation.status == "processing"
                )
            )
            or 0
        )


async def test_worker_killed_mid_run_then_rerun_leaves_no_duplicates(
    database_url: str,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    fake: tuple[FakeAnthropic, Scripted],
    tmp_path: Path,
) -> None:
    server, scripted = fake
    ids = []
    for i in range(3):
        _, conversation_id = await seed_conversation(
            sessions, start=clock.now(), texts=[f"conversation {i}: hello", "hi there"], user_key=f"cli:u{i}"
        )
        ids.append(conversation_id)
    scripted.block_summaries = True

    worker = _worker(database_url, server.base_url, tmp_path)
    assert scripted.summary_started.wait(60), worker.stderr.read() if worker.stderr else ""
    # Killed after extraction and the memory rows were written, while the day summary is pending.
    assert await _count(sessions, ConversationThread) == 2
    assert await _count(sessions, Conversation, Conversation.status == "processing") == 1
    worker.send_signal(signal.SIGKILL)
    worker.wait(30)
    scripted.block_summaries = False
    scripted.release.set()

    rerun = _worker(database_url, server.base_url, tmp_path, POSTPROCESS_CLAIM_TIMEOUT_SECONDS="0")
    out, err = rerun.communicate(timeout=120)

    assert rerun.returncode == 0, err
    assert '"processed": 3' in out
    assert await _count(sessions, Conversation, Conversation.status == "processed") == 3
    assert scripted.extractions == {0: 1, 1: 1, 2: 1}  # the killed run's extraction was reused
    assert await _count(sessions, ConversationThread) == 6
    assert await _count(sessions, Thought) == 3
    assert await _count(sessions, UserFact) == 6
    assert await _count(sessions, TranscriptMessage, TranscriptMessage.kind == "note") == 3
    assert await _count(sessions, DaySegment, DaySegment.summary.is_not(None)) == 3
    async with sessions() as session:
        attempts = dict((await session.execute(select(Conversation.id, Conversation.attempts))).all())
    assert sorted(attempts.values()) == [1, 1, 2]


async def test_two_worker_processes_process_each_conversation_exactly_once(
    database_url: str,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    fake: tuple[FakeAnthropic, Scripted],
    tmp_path: Path,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("several worker processes on one database is the PostgreSQL deployment")
    server, scripted = fake
    for i in range(CONVERSATIONS):
        await seed_conversation(
            sessions,
            start=clock.now().replace(hour=8 + i % 5),
            texts=[f"conversation {i}: hello", "hi there"],
            user_key=f"cli:u{i // 5}",
        )

    started = time.perf_counter()
    scripted.hold = threading.Event()
    workers = [_worker(database_url, server.base_url, tmp_path) for _ in range(2)]
    try:
        # Each worker waits for its first answer holding its first claim, until the other holds one
        # too: a worker that claimed everything, or a claim both could take, leaves this waiting.
        claimers = 0
        for _ in range(1200):
            claimers = await _count_claimers(sessions)
            if claimers == 2 or any(w.poll() is not None for w in workers):
                break
            await asyncio.sleep(0.1)
        assert claimers == 2, [w.stderr.read() for w in workers if w.poll() is not None and w.stderr]
    finally:
        scripted.hold.set()
    outputs = [await asyncio.to_thread(w.communicate, timeout=300) for w in workers]
    elapsed = time.perf_counter() - started

    assert [w.returncode for w in workers] == [0, 0], [err for _, err in outputs]
    assert scripted.extractions == {i: 1 for i in range(CONVERSATIONS)}
    async with sessions() as session:
        rows = (await session.execute(select(Conversation.status, Conversation.attempts))).all()
        by_worker = Counter((await session.execute(select(Conversation.claimed_by))).scalars().all())
    assert Counter(rows) == {("processed", 1): CONVERSATIONS}
    assert await _count(sessions, ConversationThread) == 2 * CONVERSATIONS
    assert len(by_worker) == 2, by_worker  # both processes took a share
    print(f"two workers: {dict(by_worker)} in {elapsed:.1f} s")
