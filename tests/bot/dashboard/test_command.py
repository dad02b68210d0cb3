"""/stats ends with a web_app button that opens the dashboard on WEBAPP_URL's host."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import build_runtime
from bot.web.dashboard.command import BUTTON_TEXT, OPEN_TEXT
from tests.bot.conftest import ADMIN


async def test_stats_offers_the_dashboard(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    settings = settings_factory(webapp_url="https://nikita.example/timeline?x=1", embedder="none")
    runtime = await build_runtime(settings, model=TestModel(), migrate=False, summary_model=TestModel())
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        tg.command(ADMIN, "/stats")
        report, offer = await tg.wait_for_messages(2, chat_id=ADMIN)
    assert report.text.startswith("users: ") and "reply_markup" not in report.params
    assert offer.text == OPEN_TEXT
    button = {"text": BUTTON_TEXT, "web_app": {"url": "https://nikita.example/dashboard"}}
    assert offer.params["reply_markup"] == {"inline_keyboard": [[button]]}
