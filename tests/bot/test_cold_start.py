"""A bot started on a populated database answers at once: a PDF and a text from two people, waiting
when it starts, and the text is answered before the PDF and before the start-up work is done. Started
without PORT, it polls and listens on no port.

A real `python -m bot run` with the offline MiniLM embedder starts on a database whose most recently
active people have messages the search index has not seen (bench/start_data.py), so its start-up
work (the embedding model, the index repair, the vectors) has seconds to do. The figures (how much
sooner, against a warm bot) are `python -m bot bench start`'s; this test holds the order.

The order holds by construction, not by the start-up work outlasting a reply: its first step waits
until the poller's first batch (both updates) is in the inbox and the dispatcher has worked it all
(`caught_up` in bot/app.py), so `start-up work done` cannot be logged before the text's reply is
sent. Only STARTUP_PATIENCE_SECONDS (10 s) bounds that wait; the two replies take about 3 s (the
PDF's parse deadline), so the test fails only if the process cannot answer within that bound.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent.core.settings import Settings
from bench.delivery_harness import BotProcess, bot_env, echo, until
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.pdf import make_pdf_bomb
from bench.fakes.telegram_api import FakeTelegram
from bench.start import STARTUP_DONE
from bench.start_data import Population, populate, telegram_ids
from tests.bot.test_start import listening_ports
from tests.conftest import migrated_sqlite_url, postgres_database

pytestmark = [pytest.mark.slow, pytest.mark.process]

POPULATION = Population(people=4, messages=120, lagging_people=3, lagging_messages=40)


@pytest.fixture(params=["sqlite", "postgres"])
def populated(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated database of a few people with history, some of it not yet embedded."""
    settings = Settings(_env_file=None)
    if request.param == "sqlite":
        url = migrated_sqlite_url(request.getfixturevalue("migrated_sqlite"), tmp_path / "bot.db")
        asyncio.run(populate(url, POPULATION, now=datetime.now(UTC), settings=settings))
        yield url
        return
    template = request.getfixturevalue("migrated_postgres")
    if template is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    with postgres_database("nikita_cold", template) as url:
        asyncio.run(populate(url, POPULATION, now=datetime.now(UTC), settings=settings))
        yield url


@pytest.fixture
def model() -> Iterator[FakeAnthropic]:
    with FakeAnthropic(responder=echo, delay=0.2) as fake:
        yield fake


async def test_a_text_is_answered_before_the_pdf_and_the_start_up_work(
    populated: str, model: FakeAnthropic, tmp_path: Path
) -> None:
    texter, bomber = telegram_ids(POPULATION)[:2]  # both among the people the start-up work warms
    async with FakeTelegram(token="123:ABC") as telegram:
        # Both waiting for the bot as it starts, as when a message wakes a scaled-to-zero instance.
        telegram.document(bomber, file_name="report.pdf", content=make_pdf_bomb(pages=30, operators=200_000))
        telegram.user_message(texter, "hi, are you there?")
        env = bot_env(
            database_url=populated,
            telegram_url=telegram.base_url,
            model_url=model.base_url,
            EMBEDDER="minilm",
            DOCUMENT_PARSE_SECONDS="3",
        )
        for platform in ("PORT", "WEBHOOK_URL", "K_SERVICE", "DYNO"):
            env.pop(platform, None)
        bot = BotProcess("cold", env, tmp_path)
        bot.start()
        try:
            [text] = await telegram.wait_for_messages(1, chat_id=texter, timeout=120)
            log_then = bot.log_path.read_text()
            # Polling without PORT serves nothing: the process listens on no TCP port.
            assert bot.proc is not None and listening_ports(bot.proc.pid) == set()
            [pdf] = await telegram.wait_for_messages(1, chat_id=bomber, timeout=60)
            done = await until(lambda: STARTUP_DONE in bot.log_path.read_text(), 60)
        finally:
            code = await bot.stop()
    log = bot.log_path.read_text()
    assert code == 0, bot.log_tail()
    assert text.text == "echo: hi, are you there?"
    assert text.at < pdf.at  # the PDF's parse ran to its deadline beside the text's turn
    # The start-up work had not finished when the text was answered; it did finish after.
    assert "polling for updates" in log_then and STARTUP_DONE not in log_then, log_then
    assert done, bot.log_tail()
    assert "search vectors warmed" in log.split("polling for updates", 1)[1]  # after the start, not before
