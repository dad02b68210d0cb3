"""The timeline's web app on the test database, seeded, with Telegram-signed initData for anyone."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from pydantic_ai.models.test import TestModel
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.fakes.telegram_webapp import sign_init_data
from bot.runtime import Runtime, build_runtime
from bot.web.serve import build_pages_app
from tests.bot.conftest import TOKEN
from tests.bot.timeline.seed import NOW, Seeded, seed_timeline

Auth = Callable[..., dict[str, str]]


@pytest.fixture
def timeline_clock() -> FrozenClock:
    return FrozenClock(current=NOW)


@pytest.fixture
def timeline_settings() -> dict[str, Any]:
    """Settings a test module adds to the timeline runtime's (it overrides this fixture)."""
    return {}


@pytest.fixture
async def timeline_runtime(
    engine: AsyncEngine,
    settings_factory: Callable[..., Settings],
    timeline_clock: FrozenClock,
    timeline_settings: dict[str, Any],
) -> AsyncIterator[Runtime]:
    settings = settings_factory(embedder="none", timeline_regenerate_per_minute=2, **timeline_settings)
    runtime = await build_runtime(
        settings,
        clock=timeline_clock,
        model=TestModel(),
        summary_model=TestModel(),
        migrate=False,
        embedder=None,
    )
    yield runtime
    await runtime.close()


@pytest.fixture
async def seeded(timeline_runtime: Runtime) -> Seeded:
    return await seed_timeline(timeline_runtime.sessions)


@pytest.fixture
async def client(timeline_runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=build_pages_app(timeline_runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
        yield http


@pytest.fixture
def auth(timeline_clock: FrozenClock) -> Auth:
    """Headers with initData Telegram would sign for this Telegram user, `age` seconds ago."""

    def make(telegram_id: int, *, age: int = 0, token: str = TOKEN, **user: Any) -> dict[str, str]:
        person = {"id": telegram_id, "first_name": "Ana", "language_code": "en", **user}
        stamp = int(timeline_clock.now().timestamp()) - age
        return {"Authorization": "tma " + sign_init_data(token, user=person, auth_date=stamp)}

    return make
