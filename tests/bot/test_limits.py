"""Limits through Telegram: they outlive /forget, and /start, onboarding, /export and
/memory are limited, each with a friendly answer and no model call or document when over."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.handlers.commands import FORGOTTEN
from bot.runtime import build_runtime
from tests.bot.conftest import Brain
from tests.bot.test_app import onboard

ALICE = 42


@asynccontextmanager
async def bot(settings: Settings, brain: Brain) -> AsyncIterator[None]:
    """The bot running on these settings (its runtime is closed by the application's shutdown)."""
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    async with running(build_application(runtime, webhook=False), poll_timeout=1):
        yield


async def test_the_day_limit_outlives_forget(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, rate_limit_per_day=3)
    async with bot(settings, brain):
        for n, text in enumerate(["one", "two"], 1):
            tg.user_message(ALICE, text)
            await tg.wait_for_messages(n, chat_id=ALICE)
        tg.command(ALICE, "/forget confirm")
        assert (await tg.wait_for_messages(3, chat_id=ALICE))[-1].text == FORGOTTEN
        tg.user_message(ALICE, "three")
        await tg.wait_for_messages(4, chat_id=ALICE)
        tg.user_message(ALICE, "four")
        replies = await tg.wait_for_messages(5, chat_id=ALICE)
    assert replies[3].text == "echo: three"
    assert "tomorrow" in replies[4].text
    assert brain.chat_calls == ["one", "two", "three"]


async def test_start_and_onboarding_are_limited(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(rate_limit_start_per_minute=2, rate_limit_onboarding_per_minute=3)
    async with bot(settings, brain):
        for n in range(1, 4):
            tg.command(ALICE, "/start")
            await tg.wait_for_messages(n, chat_id=ALICE)
        tg.user_message(ALICE, "hello")
        tg.user_message(ALICE, "call me Sam")
        replies = await tg.wait_for_messages(5, chat_id=ALICE)
    assert "/start a lot" in replies[2].text  # the third /start: no onboarding call
    assert "getting to know you" in replies[4].text  # the fourth onboarding call in a minute
    assert brain.onboarding_calls == ["/start", "/start", "hello"]


async def test_export_and_memory_are_limited(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(rate_limit_export_per_minute=1, rate_limit_memory_per_minute=1)
    async with bot(settings, brain):
        await onboard(tg)
        for n, command in enumerate(["/export", "/export", "/memory", "/memory"], 5):
            tg.command(ALICE, command)
            if command == "/export" and n == 5:
                await tg.wait_for_documents(1)
            else:
                await tg.wait_for_messages(n - 1, chat_id=ALICE)
        texts = [m.text for m in await tg.wait_for_messages(6, chat_id=ALICE)]
    assert len(tg.documents) == 1
    assert "export" in texts[4]
    assert "memory" in texts[-1].lower() and "minute" in texts[-1]
