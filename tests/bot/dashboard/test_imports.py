"""The dashboard shows the post-processing of imported conversations apart from chat: its calls,
tokens and dollars a day, and the imported conversations waiting; on both databases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest
from pydantic_ai.models.test import TestModel

from agent.core.prices import estimate_cost
from agent.core.settings import Settings
from bench.clock import FrozenClock
from bot.runtime import build_runtime
from bot.web.serve import build_pages_app
from db.models import ModelUsage
from tests.bot.conftest import ADMIN
from tests.bot.dashboard.seed import DAY2, NOW, USAGE, seed_dashboard
from tests.bot.dashboard.test_api import MODEL, _signed
from tests.jobs.import_helpers import import_run, imported_conversation, person

pytestmark = pytest.mark.both_databases


async def test_import_spend_is_shown_apart_from_chat(
    engine: Any, settings_factory: Callable[..., Settings]
) -> None:
    # Imports are priced at the summary model, which makes their calls.
    settings = settings_factory(model=MODEL, summary_model=MODEL, embedder="none")
    runtime = await build_runtime(
        settings, clock=FrozenClock(current=NOW), model=TestModel(), summary_model=TestModel(), migrate=False
    )
    try:
        await seed_dashboard(runtime.sessions)
        ana = await person(runtime.sessions, "cli:ana-import", now=NOW)
        run = await import_run(runtime.sessions, ana, at=NOW)
        await imported_conversation(runtime.sessions, ana, run, [("user", "hello", NOW)], today=NOW)
        async with runtime.sessions() as session, session.begin():
            session.add(
                ModelUsage(
                    user_id=ana,
                    day=DAY2,
                    kind="import",
                    calls=3,
                    input_tokens=9000,
                    output_tokens=600,
                    cache_read_tokens=0,
                    cache_write_tokens=0,
                    cache_write_1h_tokens=0,
                )
            )
        transport = httpx.ASGITransport(app=build_pages_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            response = await http.get("/dashboard/api/days?days=3", headers=_signed(ADMIN))
        assert response.status_code == 200, response.text
        data = response.json()
    finally:
        await runtime.close()

    imports = estimate_cost(MODEL, 9000, 600)
    assert imports is not None
    assert data["imports"]["calls"] == [0, 0, 3]
    assert data["imports"]["tokens"] == [0, 0, 9600]
    assert data["imports"]["billed"][2] == pytest.approx(float(imports.billed), abs=1e-6)
    # Chat's cost and cache share are as without the import.
    tokens_in, read, written, tokens_out = USAGE[DAY2]
    chat = estimate_cost(MODEL, tokens_in, tokens_out, cache_read_tokens=read, cache_write_tokens=written)
    assert chat is not None
    assert data["cost"]["billed"][2] == pytest.approx(float(chat.billed), abs=1e-6)
    assert data["cache_read_share"][2] == pytest.approx(read / tokens_in)
    assert data["now"]["imports_waiting"] == 1
