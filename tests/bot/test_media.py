"""Photos, text files and voice notes end to end: python-telegram-bot against the fake Bot API, the
Anthropic SDK (streamed, through PydanticAI) against the fake Messages API, a fake transcription server."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from sqlalchemy import select

from agent.chat.agent import build_model
from agent.core.settings import Settings
from bench.fakes.anthropic_api import FakeAnthropic, fake_anthropic_server
from bench.fakes.pdf import make_pdf
from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.transcription_api import FakeTranscriber
from bot.handlers.media import TOO_BIG, UNHEARD, UNREADABLE_PDF
from bot.runtime import Runtime
from db.models import Conversation
from tests.bot.conftest import running_bot, transcript_rows

ALICE = 42
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
async def bot_runtime(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    claude: FakeAnthropic,
    transcriber: FakeTranscriber,
    monkeypatch: pytest.MonkeyPatch,
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
