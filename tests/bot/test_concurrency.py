"""Many users at once: every message answered, each user's replies in the order they wrote."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.runtime import build_runtime
from tests.bot.conftest import Brain

pytestmark = [pytest.mark.both_databases, pytest.mark.slow]

USERS = 12
MESSAGES = 4


async def test_users_at_once_each_answered_in_order(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    # The model takes a while, so users overlap and a serial bot would take USERS*MESSAGES*delay.
    brain = Brain(delay=0.05)
    settings = settings_factory(onboarding_enabled=False)
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        started = time.monotonic()
        for n in range(MESSAGES):
            for user in range(1, USERS + 1):
                tg.user_message(1000 + user, f"u{user} m{n}")
        await tg.wait_for_messages(USERS * MESSAGES, timeout=120)
        elapsed = time.monotonic() - started
    for user in range(1, USERS + 1):
        texts = [m.text for m in tg.messages_to(1000 + user)]
        assert texts == [f"echo: u{user} m{n}" for n in range(MESSAGES)], texts
    # Different users' model calls overlapped (a serial bot would never have two in flight).
    assert brain.most_in_flight > 1
    print(f"{USERS * MESSAGES} turns in {elapsed:.1f} s, up to {brain.most_in_flight} model calls at once")
