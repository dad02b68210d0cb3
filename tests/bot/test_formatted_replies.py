"""Formatted replies end to end: the real python-telegram-bot against the fake Bot API's entity checks."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.formatting import render
from bot.runtime import Runtime
from tests.bot.conftest import Brain, running_bot
from tests.bot.test_formatting import EVERY_ENTITY

ALICE = 42


@pytest.fixture
async def chat(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> AsyncIterator[Runtime]:
    settings = settings_factory(onboarding_enabled=False, stream_replies=False)
    async with running_bot(settings, FunctionModel(brain)) as runtime:
        yield runtime


async def test_markdown_arrives_as_entities_telegram_accepts(
    chat: Runtime, tg: FakeTelegram, brain: Brain
) -> None:
    brain.reply = lambda text: EVERY_ENTITY
    tg.user_message(ALICE, "show me everything")
    [sent] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert "**" not in sent.text and sent.parse_mode is None
    kinds = {e["type"] for e in sent.params["entities"]}
    assert {"bold", "italic", "strikethrough", "code", "pre", "text_link", "spoiler", "blockquote"} <= kinds


async def test_a_10000_character_reply_arrives_in_accepted_parts(
    chat: Runtime, tg: FakeTelegram, brain: Brain
) -> None:
    block = "```\n" + "\n".join(f"step {n}" for n in range(80)) + "\n```"
    markdown = "\n\n".join(["A **long** answer, with _style_ and 😀. " * 20, block] * 8)[:10_000]
    brain.reply = lambda text: markdown
    tg.user_message(ALICE, "a long one please")
    parts = len(render(markdown))
    assert parts >= 3
    sent = await tg.wait_for_messages(parts, chat_id=ALICE)
    assert len(sent) == parts and all(len(m.text) <= 4096 for m in sent)
    # Each code block arrives whole, inside one message.
    assert all(m.text.count("step 0") == m.text.count("step 79") for m in sent)
    joined = "".join(m.text for m in sent)
    assert joined.count("step 79") == markdown.count("step 79")


async def test_formatting_refused_by_telegram_falls_back_to_plain_text(
    chat: Runtime, tg: FakeTelegram, brain: Brain
) -> None:
    brain.reply = lambda text: "**bold** claim"
    tg.fail_next("sendMessage", description="Bad Request: can't parse entities: unsupported start tag")
    tg.user_message(ALICE, "hi")
    [sent] = await tg.wait_for_messages(1, chat_id=ALICE)
    assert sent.text == "bold claim" and not sent.params.get("entities")
