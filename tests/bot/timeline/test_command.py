"""Opening the timeline from Telegram: /timeline's button, the menu button, the webhook's web app."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from pydantic_ai.models.test import TestModel
from telegram import Bot, MenuButtonWebApp, WebAppInfo
from telegram.error import BadRequest

from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import build_runtime
from bot.web.app import build_web_app
from bot.web.timeline.command import BUTTON_TEXT, NOT_SET_UP, OPEN_TEXT
from tests.bot.conftest import TOKEN
from tests.bot.timeline.conftest import Auth

URL = "https://nikita.example/timeline"


async def test_timeline_sends_a_web_app_button_and_the_menu_button_opens_it(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    settings = settings_factory(onboarding_enabled=False, webapp_url=URL, embedder="none")
    runtime = await build_runtime(settings, model=TestModel(), migrate=False, summary_model=TestModel())
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        assert tg.menu_buttons[""] == {"type": "web_app", "text": "Timeline", "web_app": {"url": URL}}
        tg.command(7, "/timeline")
        reply = (await tg.wait_for_messages(1, chat_id=7))[0]
    assert reply.text == OPEN_TEXT
    assert reply.params["reply_markup"] == {
        "inline_keyboard": [[{"text": BUTTON_TEXT, "web_app": {"url": URL}}]]
    }
    assert "timeline" in [c["command"] for c in tg.commands[("default", "")]]


async def test_without_webapp_url_timeline_says_so_and_the_menu_is_left_alone(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    settings = settings_factory(onboarding_enabled=False, embedder="none")
    runtime = await build_runtime(settings, model=TestModel(), migrate=False, summary_model=TestModel())
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        tg.command(7, "/timeline")
        reply = (await tg.wait_for_messages(1, chat_id=7))[0]
    assert reply.text == NOT_SET_UP and "reply_markup" not in reply.params
    assert tg.calls_to("setChatMenuButton") == []


def test_webapp_url_must_be_https() -> None:
    with pytest.raises(ValidationError, match="https"):
        Settings(_env_file=None, webapp_url="http://nikita.example/timeline")  # type: ignore[call-arg]


async def test_telegram_refuses_a_web_app_button_that_is_not_https(tg: FakeTelegram) -> None:
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        with pytest.raises(BadRequest, match=r"(?i)only https links are allowed"):
            await bot.set_chat_menu_button(menu_button=MenuButtonWebApp("T", WebAppInfo("http://x.example")))


async def test_the_webhook_web_app_serves_the_timeline(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    auth: Auth,
    timeline_clock: FrozenClock,
) -> None:
    settings = settings_factory(
        webhook_url="https://nikita.example/telegram/webhook", webhook_secret="s3cret", embedder="none"
    )
    runtime = await build_runtime(
        settings, clock=timeline_clock, model=TestModel(), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime)
    web = build_web_app(application, runtime)
    async with running(application):
        transport = httpx.ASGITransport(app=web)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            assert (await http.get("/timeline")).status_code == 200
            assert (await http.get("/timeline/api/days")).status_code == 401
            days = await http.get("/timeline/api/days", headers=auth(7))
            assert days.status_code == 200 and days.json()["days"] == []
            assert (await http.get("/healthz")).status_code == 200
