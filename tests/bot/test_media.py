"""Photos, text files, PDFs and voice notes end to end: python-telegram-bot against the fake Bot API, the
Anthropic SDK (streamed, through PydanticAI) against the fake Messages API, a fake transcription server.
PDFs are parsed in real child processes, bombs included (bench/fakes/pdf.py)."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from agent.core.models import build_model
from agent.core.settings import Settings
from bench.fakes.anthropic_api import FakeAnthropic, fake_anthropic_server
from bench.fakes.pdf import make_pdf, make_pdf_bomb
from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.transcription_api import FakeTranscriber
from bot.handlers.media import HEAVY_PDF, TOO_BIG, UNHEARD, UNREADABLE_PDF
from bot.runtime import Runtime
from db.models import Conversation
from tests.bot.conftest import running_bot, transcript_rows

ALICE = 42
BOB = 43
MODEL = "anthropic:claude-haiku-4-5"
JPEG = b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8
DESCRIBED = "<attachment_description>A tabby cat asleep on a red sofa.</attachment_description>"


@pytest.fixture
def claude() -> Iterator[FakeAnthropic]:
    yield from fake_anthropic_server()


@pytest.fixture
def transcriber() -> Iterator[FakeTranscriber]:
    with FakeTranscriber("remind me to buy oat milk") as fake:
        yield fake


@pytest.fixture
def document_limits() -> dict[str, Any]:
    """DOCUMENT_PARSE_* overrides; a test parametrizes this fixture to tighten them."""
    return {}


@pytest.fixture
async def bot_runtime(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    claude: FakeAnthropic,
    transcriber: FakeTranscriber,
    monkeypatch: pytest.MonkeyPatch,
    document_limits: dict[str, Any],
) -> AsyncIterator[Runtime]:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", claude.base_url)
    settings = settings_factory(
        onboarding_enabled=False,
        model=MODEL,
        anthropic_api_key="test-key",
        stream_interval_seconds=0.1,
        photo_max_bytes=100_000,
        document_max_bytes=1000,
        transcription_url=transcriber.url,
        transcription_api_key="sk-test",
        **document_limits,
    )
    async with running_bot(settings, build_model(MODEL, settings)) as runtime:
        yield runtime


def _blocks(body: dict[str, Any]) -> list[dict[str, Any]]:
    content = body["messages"][-1]["content"]
    return content if isinstance(content, list) else [{"type": "text", "text": content}]


async def test_a_photo_is_seen_and_remembered_as_words(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    claude.script(DESCRIBED + "What a **cozy** cat! What's its name?", "ok")
    tg.photo(ALICE, caption="my cat", content=JPEG)
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert reply.text == "What a cozy cat! What's its name?"
    [image] = [b for b in _blocks(claude.message_bodies()[0]) if b["type"] == "image"]
    data = base64.b64encode(JPEG).decode()
    assert image["source"] == {"type": "base64", "media_type": "image/jpeg", "data": data}
    assert tg.downloads == [f"files/{tg.calls_to('getFile')[0].params['file_id']}"]
    assert not any("attachment_description" in d.text for d in tg.drafts)  # never shown, not even streamed
    assert (await transcript_rows(bot_runtime))[:2] == [
        ("user", "photo", "[photo: A tabby cat asleep on a red sofa.] my cat"),
        ("assistant", "text", "What a **cozy** cat! What's its name?"),
    ]
    async with bot_runtime.sessions() as session:
        conversation = await session.scalar(select(Conversation))
        assert conversation is not None
        stored = json.dumps(conversation.messages)
    assert data[:40] not in stored and "tabby cat" in stored
    # The next turn's history carries the description, not the image.
    tg.user_message(ALICE, "her name is Mia")
    await tg.wait_for_messages(2, chat_id=ALICE)
    later = json.dumps(claude.message_bodies()[-1]["messages"])
    assert '"image"' not in later and "tabby cat" in later


async def test_a_text_file_is_read_and_a_big_photo_is_declined(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    claude.script("<attachment_description>A shopping list.</attachment_description>Eggs and milk, got it.")
    tg.document(ALICE, file_name="list.csv", caption="for later", content=b"item,qty\neggs,6\nmilk,1\n")
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert reply.text == "Eggs and milk, got it."
    text = json.dumps(_blocks(claude.message_bodies()[0]))
    assert '<document name=\\"list.csv\\">' in text and "eggs,6" in text
    tg.photo(ALICE, content=b"\xff\xd8" + b"x" * 200_000)
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[1].text == TOO_BIG.format(what="photo", limit="100 KB")
    assert len(claude.message_bodies()) == 1  # the big photo never reached the model
    rows = await transcript_rows(bot_runtime)
    assert rows[0] == ("user", "document", "[document list.csv: A shopping list.] for later")
    assert rows[2][:2] == ("user", "photo")


@pytest.mark.process
async def test_a_pdf_is_read_page_by_page_and_a_scanned_one_is_declined(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    claude.script("<attachment_description>A two-day trip plan.</attachment_description>Porto on day 2!")
    plan = make_pdf([["Trip plan", "Day 1: Lisbon"], ["Day 2: Porto"]])
    tg.document(ALICE, file_name="plan.pdf", caption="our trip", content=plan)
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert reply.text == "Porto on day 2!"
    text = json.dumps(_blocks(claude.message_bodies()[0]))
    assert '<document name=\\"plan.pdf\\">' in text
    assert "[page 1]\\nTrip plan\\nDay 1: Lisbon" in text and "[page 2]\\nDay 2: Porto" in text
    # A PDF of images only: an honest answer, no model call.
    tg.document(ALICE, file_name="scan.pdf", content=make_pdf([[]]))
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[1].text == UNREADABLE_PDF
    assert len(claude.message_bodies()) == 1
    rows = await transcript_rows(bot_runtime)
    assert rows[0] == ("user", "document", "[document plan.pdf: A two-day trip plan.] our trip")
    assert rows[2][:2] == ("user", "document") and "scan.pdf" in rows[2][2]


def _parse_children() -> list[int]:
    """Pids of this process's live document-parser children (read from /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (OSError, IndexError):  # gone while we looked
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z" and b"parse_child" in cmdline:
            found.append(int(stat.parent.name))
    return found


@dataclass
class Lags:
    """What a probe saw: the worst oversleep of `asyncio.sleep(0.05)`, the worst round trip through
    the default thread pool, and how many of its rounds ran while a document was being parsed."""

    sleep: float = 0.0
    pool: float = 0.0
    rounds_while_parsing: int = 0


async def _probe(stop: asyncio.Event, runtime: Runtime) -> Lags:
    lags = Lags()
    while not stop.is_set():
        started = time.perf_counter()
        await asyncio.sleep(0.05)
        lags.sleep = max(lags.sleep, time.perf_counter() - started - 0.05)
        started = time.perf_counter()
        await asyncio.to_thread(time.sleep, 0)
        lags.pool = max(lags.pool, time.perf_counter() - started)
        lags.rounds_while_parsing += runtime.documents.running > 0
    return lags


BOMB_LIMITS = {"document_parse_seconds": 2.0, "document_parse_memory_mb": 256}


@pytest.mark.process
@pytest.mark.parametrize("document_limits", [BOMB_LIMITS])
async def test_a_pdf_bomb_is_answered_honestly_within_the_deadline_and_its_child_is_gone(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    bomb = make_pdf_bomb(pages=30, operators=200_000)  # minutes of pypdf's text extraction
    assert len(bomb) < 8_000
    started = time.perf_counter()
    tg.document(ALICE, file_name="report.pdf", caption="summarise please", content=bomb)
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE, timeout=20)
    assert reply.text == HEAVY_PDF
    assert time.perf_counter() - started < BOMB_LIMITS["document_parse_seconds"] + 3.0
    assert bot_runtime.documents.running == 0 and _parse_children() == []
    assert claude.message_bodies() == []  # the model never saw it
    [row] = await transcript_rows(bot_runtime)
    assert row[:2] == ("user", "document") and "report.pdf" in row[2] and "summarise please" in row[2]


@pytest.mark.process
# Without the embedder, which embeds in the default pool too: the probe sees only who parses there.
@pytest.mark.parametrize("document_limits", [{**BOMB_LIMITS, "embedder": "none"}])
async def test_the_event_loop_and_the_default_thread_pool_stay_free_while_a_bomb_is_parsed(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic
) -> None:
    # One worker in the default pool: a parse that took it would starve everything else there.
    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=1))
    claude.script("Hi Bob!", "Still here.")
    tg.user_message(BOB, "hello", first_name="Bob")  # the first turn's one-off loading is not measured
    await tg.wait_for_messages(1, chat_id=BOB, timeout=20)
    stop = asyncio.Event()
    probe = asyncio.create_task(_probe(stop, bot_runtime))
    tg.document(ALICE, file_name="report.pdf", content=make_pdf_bomb(pages=30, operators=200_000))
    tg.user_message(BOB, "are you there?", first_name="Bob")
    replies = await tg.wait_for_messages(2, chat_id=BOB, timeout=20)
    assert replies[1].text == "Still here."
    [heavy] = await tg.wait_for_messages(1, chat_id=ALICE, timeout=20)
    stop.set()
    lags = await probe
    assert heavy.text == HEAVY_PDF
    assert lags.rounds_while_parsing >= 10  # the probe ran through the parse (2 s of 0.05 s rounds)
    # Generous bounds: the two cores are shared with the child and with other work.
    assert lags.sleep < 0.5 and lags.pool < 0.5


MEMORY_LIMITS = {"document_parse_seconds": 30.0, "document_parse_memory_mb": 64}


@pytest.mark.process
@pytest.mark.parametrize("document_limits", [MEMORY_LIMITS])
async def test_a_pdf_over_the_memory_ceiling_is_declined_honestly(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="bot.handlers.media")
    # One page of 200,000 text operators: about 90 MB to read, in a file of 3 KB.
    tg.document(ALICE, file_name="big.pdf", content=make_pdf_bomb(pages=1, operators=200_000))
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE, timeout=40)
    assert reply.text == HEAVY_PDF
    assert [r.__dict__.get("reason") for r in caplog.records if r.name == "bot.handlers.media"] == ["memory"]
    assert claude.message_bodies() == [] and _parse_children() == []
    rows = await transcript_rows(bot_runtime)
    assert rows[0][:2] == ("user", "document") and "big.pdf" in rows[0][2]


async def test_a_voice_note_is_transcribed_and_answered_as_text(
    bot_runtime: Runtime, tg: FakeTelegram, claude: FakeAnthropic, transcriber: FakeTranscriber
) -> None:
    claude.script("Oat milk, noted!")
    tg.voice(ALICE, duration=4, content=b"OggS fake opus")
    [reply] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert reply.text == "Oat milk, noted!"
    [request] = transcriber.requests
    assert (request.model, request.audio) == ("whisper-1", b"OggS fake opus")
    assert "remind me to buy oat milk" in json.dumps(claude.message_bodies()[0]["messages"])
    transcriber.failing = True
    tg.voice(ALICE, content=b"OggS again")
    replies = await tg.wait_for_messages(2, chat_id=ALICE)
    assert replies[1].text == UNHEARD
    assert [row[1:] for row in await transcript_rows(bot_runtime)] == [
        ("voice", "[voice 4s] remind me to buy oat milk"),
        ("text", "Oat milk, noted!"),
        ("voice", "[voice 3s]"),
    ]
