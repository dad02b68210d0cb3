"""What guards the Mini App's calls besides the signature: a change (and the dashboard) needs a sign-in
at most TIMELINE_WRITE_MAX_AGE_SECONDS old while reads keep the longer window; a person /deny-ed in
the chat gets the access answer, not their data; search and regenerate count against the person's
message limits. The rules and counts are rows, so these run on both databases."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import httpx
import pytest
from pydantic_ai.models.test import TestModel
from sqlalchemy import select

from agent.account.access import AccessPolicy
from agent.core.settings import Settings
from bench.clock import FrozenClock
from bot.runtime import Runtime, build_runtime
from bot.web.serve import build_pages_app
from bot.web.timeline.api import DENIED
from db.models import User, UserFact
from db.repositories.facts import FactRepository
from tests.bot.conftest import ADMIN
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, NOW, Seeded, seed_timeline
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases

HOUR = 3600


async def _fact(runtime: Runtime, telegram_id: int, text: str) -> int:
    async with runtime.sessions() as session, session.begin():
        user_id = await session.scalar(select(User.id).where(User.telegram_id == telegram_id))
        assert user_id is not None
        await add_facts(FactRepository(session), user_id, None, [text], NOW, source="tool")
        found = await session.scalar(select(UserFact.id).where(UserFact.content == text))
    assert found is not None
    return found


async def _held(client: httpx.AsyncClient, auth: Auth, fact_id: int) -> bool:
    """Whether the fact is still in Ana's listing."""
    listing = (await client.get("/timeline/api/facts", headers=auth(ANA))).json()
    return fact_id in [f["id"] for f in listing["profile"] + listing["rest"]]


async def test_a_change_needs_a_sign_in_at_most_an_hour_old_and_reads_keep_the_day(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    fact = await _fact(timeline_runtime, ANA, "Ana plays the cello")
    two_hours = auth(ANA, age=2 * HOUR)
    for path in ("/timeline/api/days", "/timeline/api/facts", "/timeline/api/group-lines"):
        assert (await client.get(path, headers=two_hours)).status_code == 200, path
    changes = [
        f"/timeline/api/facts/{fact}/forget",
        f"/timeline/api/facts/{fact}/pin",
        "/timeline/api/days/2026-03-02/regenerate",
        "/timeline/api/group-lines/forget",
    ]
    for path in changes:
        refused = await client.post(path, headers=two_hours)
        assert refused.status_code == 401, (path, refused.text)
        assert "too old" in refused.json()["error"]
    reworded = await client.post(
        f"/timeline/api/facts/{fact}/reword", json={"content": "Ana plays the viola"}, headers=two_hours
    )
    assert reworded.status_code == 401
    assert await _held(client, auth, fact)
    # Within the hour the same change goes through.
    forgotten = await client.post(f"/timeline/api/facts/{fact}/forget", headers=auth(ANA, age=HOUR - 60))
    assert forgotten.status_code == 200 and not await _held(client, auth, fact)


async def test_the_dashboard_needs_a_sign_in_at_most_an_hour_old(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    assert (await client.get("/dashboard/api/days", headers=auth(ADMIN, age=2 * HOUR))).status_code == 401
    assert (await client.get("/dashboard/api/days", headers=auth(ADMIN, age=HOUR - 60))).status_code == 200


async def test_a_denied_person_gets_the_access_answer_not_their_data(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    fact = await _fact(timeline_runtime, ANA, "Ana plays the cello")
    # An admin's /deny, made by the bot's own policy: a row every instance reads.
    runtime = timeline_runtime
    bots = AccessPolicy.from_settings(runtime.sessions, runtime.settings, runtime.clock)
    await bots.set_rule(str(ANA), "deny", by=ADMIN)
    calls = [
        ("GET", "/timeline/api/search?q=Elgar&scope=all"),
        ("GET", "/timeline/api/days/2026-03-02"),
        ("GET", "/timeline/api/facts"),
        ("POST", f"/timeline/api/facts/{fact}/hide"),
        ("POST", "/timeline/api/days/2026-03-02/regenerate"),
    ]
    for method, path in calls:
        refused = await client.request(method, path, headers=auth(ANA))
        assert refused.status_code == 403, (path, refused.text)
        assert refused.json() == {"error": DENIED}
    async with timeline_runtime.sessions() as session:
        kept = await session.get(UserFact, fact)
        assert kept is not None and not kept.hidden
    # Everyone else is served as before.
    assert (await client.get("/timeline/api/days", headers=auth(BEN))).status_code == 200


@pytest.fixture
async def strict_client(
    engine: object, settings_factory: Callable[..., Settings]
) -> AsyncIterator[tuple[httpx.AsyncClient, Runtime]]:
    """The timeline with the chat's message limit at 3 a minute."""
    settings = settings_factory(embedder="none", rate_limit_per_minute=3)
    runtime = await build_runtime(
        settings,
        clock=FrozenClock(current=NOW),
        model=TestModel(),
        summary_model=TestModel(),
        migrate=False,
        embedder=None,
    )
    await seed_timeline(runtime.sessions)
    try:
        transport = httpx.ASGITransport(app=build_pages_app(runtime))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http, runtime
    finally:
        await runtime.close()


async def test_search_and_regenerate_share_the_persons_message_limit(
    strict_client: tuple[httpx.AsyncClient, Runtime], auth: Auth
) -> None:
    client, _ = strict_client
    search = "/timeline/api/search?q=Elgar&scope=all"
    assert (await client.get(search, headers=auth(ANA))).status_code == 200
    assert (await client.get(search, headers=auth(ANA))).status_code == 200
    regenerated = await client.post("/timeline/api/days/2026-03-02/regenerate", headers=auth(ANA))
    assert regenerated.status_code == 200
    for method, path in (("GET", search), ("POST", "/timeline/api/days/2026-03-02/regenerate")):
        over = await client.request(method, path, headers=auth(ANA))
        assert over.status_code == 429, path
        assert over.json() == {"error": "That's a lot of requests at once; try again in a minute."}
    # Another person's allowance is their own.
    assert (await client.get(search, headers=auth(BEN))).status_code == 200
