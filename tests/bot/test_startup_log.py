"""A real `python -m bot run` with LOG_FORMAT=json: JSON lines, and the deprecated-model warning at start."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bench.delivery_harness import TOKEN_AND_SECRET, BotProcess, bot_env, echo
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.telegram_api import FakeTelegram
from tests.conftest import migrated_sqlite_url

pytestmark = [pytest.mark.slow, pytest.mark.process]


@pytest.fixture
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(responder=echo) as fake:
        yield fake


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN_AND_SECRET[0]) as fake:
        yield fake


async def test_json_logs_and_the_deprecated_model_warning(
    telegram: FakeTelegram, model: FakeAnthropic, tmp_path: Path, migrated_sqlite: Path
) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "bot.db")
    env = bot_env(
        database_url=url,
        telegram_url=telegram.base_url,
        model_url=model.base_url,
        MODEL="anthropic:claude-sonnet-4-5",
        LOG_FORMAT="json",
    )
    bot = BotProcess("bot", env, tmp_path)
    bot.start()
    try:
        await bot.ready(telegram)
    finally:
        await bot.stop()
    records = [json.loads(line) for line in bot.log_path.read_text().splitlines() if line.startswith("{")]
    warnings = [r for r in records if r["message"].startswith("MODEL ")]
    assert [(r["severity"], r["logger"]) for r in warnings] == [("WARNING", "bot.app")]
    # The process reads the real clock: before or after 30 November, the date and the fix are named.
    text = warnings[0]["message"]
    assert text.startswith("MODEL anthropic:claude-sonnet-4-5 ") and "end of life on 2026-11-30" in text
    assert text.endswith(": set MODEL to anthropic:claude-sonnet-5-5")
    assert any(r["message"] == "polling for updates" and r["severity"] == "INFO" for r in records)
    assert all({"severity", "message", "time", "logger"} <= set(r) for r in records)
