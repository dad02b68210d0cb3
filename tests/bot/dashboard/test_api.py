"""The dashboard's data: an admin signed in through Telegram gets every chart's series over days, read
from the rows the bot keeps; anyone else gets nothing. The queries run on both databases."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from pydantic_ai.models.test import TestModel

from agent.core.prices import estimate_cost
from agent.core.settings import Settings
from agent.reports.dashboard import REFUSALS
from bench.clock import FrozenClock
from bench.fakes.telegram_webapp import sign_init_data
from bot.runtime import build_runtime
from bot.web.serve import build_pages_app
from tests.bot.conftest import ADMIN, TOKEN
from tests.bot.dashboard.seed import (
    ANSWERED_MS,
    DAY0,
    DAY1,
    DAY2,
    FOLLOW_UP_LAG,
    NOW,
    POSTPROCESS_LAGS,
    REMINDER_LAG,
    USAGE,
    seed_dashboard,
)

MODEL = "anthropic:claude-haiku-4-5"


def _signed(telegram_id: int) -> dict[str, str]:
    user = {"id": telegram_id, "first_name": "Ada", "language_code": "en"}
    return {"Authorization": "tma " + sign_init_data(TOKEN, user=user, auth_date=int(NOW.timestamp()))}


@pytest.fixture
async def client(engine: Any, settings_factory: Callable[..., Settings]) -> AsyncIterator[httpx.AsyncClient]:
    settings = settings_factory(model=MODEL, embedder="none")
    runtime = await build_runtime(
        settings, clock=FrozenClock(current=NOW), model=TestModel(), summary_model=TestModel(), migrate=False
    )
    await seed_dashboard(runtime.sessions)
    try:
        transport = httpx.ASGITransport(app=build_pages_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http
    finally:
        await runtime.close()


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[math.ceil(0.95 * len(ordered)) - 1]


@pytest.mark.both_databases
async def test_an_admin_gets_every_series_from_the_stored_rows(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard/api/days?days=3", headers=_signed(ADMIN))
    assert response.status_code == 200, response.text
    data = response.json()
    assert data["days"] == [DAY0.isoformat(), DAY1.isoformat(), DAY2.isoformat()]
    assert data["active"] == {"people": [1, 2, 1], "groups": [0, 1, 0]}
    assert data["turns"] == [1, len(ANSWERED_MS[DAY1]), len(ANSWERED_MS[DAY2])]
    assert data["p95_turn_ms"] == [None, _p95(ANSWERED_MS[DAY1]), _p95(ANSWERED_MS[DAY2])]
    for index, day in ((1, DAY1), (2, DAY2)):
        tokens_in, read, written, tokens_out = USAGE[day]
        cost = estimate_cost(MODEL, tokens_in, tokens_out, cache_read_tokens=read, cache_write_tokens=written)
        assert cost is not None
        assert data["cost"]["billed"][index] == pytest.approx(float(cost.billed), abs=1e-6)
        assert data["cost"]["uncached"][index] == pytest.approx(float(cost.uncached), abs=1e-6)
        assert data["cache_read_share"][index] == pytest.approx(read / tokens_in)
    assert data["cost"]["billed"][1] < data["cost"]["uncached"][1]
    assert data["cost"]["billed"][0] == 0 and data["cache_read_share"][0] is None
    assert data["refusals"]["user_daily_tokens"] == [0, 2, 0]
    assert data["refusals"]["strangers"] == [0, 3, 0]
    assert data["refusals"]["not_allowed"] == [1, 0, 0]
    # Every rate limit that refused something, by its own name; the day's tokens are no refusal.
    assert data["refusals"]["rate_message_minute"] == [0, 4, 1]
    assert data["refusals"]["rate_export_day"] == [0, 0, 5]
    assert set(data["refusals"]) == {*REFUSALS, "rate_message_minute", "rate_export_day"}
    lags = data["p95_job_lag_seconds"]
    assert lags["postprocess"] == [None, _p95(POSTPROCESS_LAGS), None]
    assert lags["touchpoints"] == [None, FOLLOW_UP_LAG, None]
    assert lags["reminders"] == [None, None, REMINDER_LAG]
    assert data["now"]["inbox"]["pending"] == 1 and data["now"]["oldest_wait_seconds"] == 60
    assert data["now"]["job_lag_seconds"]["postprocess"] == 300


async def test_only_admins_signed_in_through_telegram_get_it(client: httpx.AsyncClient) -> None:
    assert (await client.get("/dashboard/api/days")).status_code == 401
    forged = {"Authorization": _signed(ADMIN)["Authorization"].replace("hash=", "hash=0")}
    assert (await client.get("/dashboard/api/days", headers=forged)).status_code == 401
    refused = await client.get("/dashboard/api/days", headers=_signed(501))
    assert refused.status_code == 403 and "admins" in refused.json()["error"]
    for bad in ("0", "91", "ten", "٣"):
        assert (
            await client.get(f"/dashboard/api/days?days={bad}", headers=_signed(ADMIN))
        ).status_code == 400
    page = await client.get("/dashboard")
    assert page.status_code == 200 and "script-src 'self';" in page.headers["content-security-policy"]
    assert "https://" not in page.text  # nothing is loaded from elsewhere
