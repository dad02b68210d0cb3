"""Documents parsed in child processes: a few at a time, and none outlives its parse."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from agent.chat.documents import DocumentParser
from agent.core.errors import DocumentTooHeavyError, UnreadablePdfError
from bench.fakes.pdf import make_pdf, make_pdf_bomb

pytestmark = pytest.mark.process

BOMB = make_pdf_bomb(pages=30, operators=200_000)


def _children() -> list[int]:
    """Pids of this process's live children."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            found.append(int(stat.parent.name))
    return found


async def test_a_normal_pdf_reads_and_garbage_is_unreadable() -> None:
    parser = DocumentParser(deadline_seconds=10, memory_mb=128, concurrency=2)
    text = await parser.pdf_text(make_pdf([["Day 1: Lisbon"], ["Day 2: Porto"]]), max_pages=5, max_chars=1000)
    assert text == "[page 1]\nDay 1: Lisbon\n\n[page 2]\nDay 2: Porto"
    with pytest.raises(UnreadablePdfError, match="could not be read") as caught:
        await parser.pdf_text(b"%PDF-1.4\n garbage", max_pages=5, max_chars=1000)
    assert not isinstance(caught.value, DocumentTooHeavyError)


async def test_parses_beyond_the_concurrency_wait_their_turn() -> None:
    parser = DocumentParser(deadline_seconds=1.0, memory_mb=128, concurrency=1)
    started = time.perf_counter()
    results = await asyncio.gather(
        *(parser.pdf_text(BOMB, max_pages=30, max_chars=1000) for _ in range(2)), return_exceptions=True
    )
    assert [getattr(r, "reason", r) for r in results] == ["deadline", "deadline"]
    assert time.perf_counter() - started >= 2.0  # one after the other, each cut at its deadline
    assert parser.running == 0 and _children() == []


async def test_a_cancelled_parse_and_a_closed_parser_leave_no_child() -> None:
    parser = DocumentParser(deadline_seconds=30, memory_mb=128, concurrency=2)
    cancelled = asyncio.create_task(parser.pdf_text(BOMB, max_pages=30, max_chars=1000))
    left = asyncio.create_task(parser.pdf_text(BOMB, max_pages=30, max_chars=1000))
    done, _ = await asyncio.wait({cancelled, left}, timeout=1.0)  # both are parsing by now
    assert not done and parser.running == 2
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert parser.running == 1
    await parser.close()  # at shutdown: the other one is killed too
    assert parser.running == 0 and _children() == []
    with pytest.raises(DocumentTooHeavyError, match="killed"):
        await left
