"""The timeline's "What I remember": the facts API with initData checked and another user's fact
refused (both databases), and the page in the real browser: grouped by kind, each with its day,
the day opened from it, one deleted."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from db.models import TranscriptMessage, User, UserFact
from db.repositories.facts import FactRepository
from tests.bot.conftest import TOKEN
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, NOW, Seeded
from tests.bot.timeline.test_browser import (
    CHROMEDRIVER,
    CHROMIUM,
    NO_CHROMIUM,
    _text,
    _wait,
    chromium,
    serve_seeded,
)

CHROMIUM_HERE = all(Path(p).exists() for p in (CHROMIUM, CHROMEDRIVER))


async def _facts(sessions: async_sessionmaker[AsyncSession]) -> dict[str, int]:
    """Ana: one fact from her Sunday message, one she asked to be saved; Ben: one of his own."""
    async with sessions() as session, session.begin():
        users = dict((await session.execute(select(User.telegram_id, User.id))).all())
        sunday = await session.scalar(
            select(TranscriptMessage.id).where(TranscriptMessage.content.like("%night train to Porto%"))
        )
        repo = FactRepository(session)
        await repo.add_sourced(
            users[ANA], None, [("Ana is going to Porto by night train", [sunday])], NOW, source="extraction"
        )
        await repo.add_many(users[ANA], None, ["Ana plays the cello"], NOW, source="tool")
        await repo.add_many(users[BEN], None, ["Ben keeps bees"], NOW, source="tool")
        return dict((await session.execute(select(UserFact.content, UserFact.id))).all())


@pytest.mark.both_databases
async def test_facts_are_listed_and_deleted_only_for_the_signed_in_user(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Any
) -> None:
    ids = await _facts(timeline_runtime.sessions)
    listed = (await client.get("/timeline/api/facts", headers=auth(ANA))).json()
    assert listed == {
        "groups": [
            {
                "kind": "you asked me to remember",
                "facts": [
                    {"id": ids["Ana plays the cello"], "content": "Ana plays the cello", "day": "2026-03-03"}
                ],
            },
            {
                "kind": "from our conversations",
                "facts": [
                    {
                        "id": ids["Ana is going to Porto by night train"],
                        "content": "Ana is going to Porto by night train",
                        "day": "2026-03-01",
                    }
                ],
            },
        ]
    }
    assert (await client.get("/timeline/api/facts")).status_code == 401
    assert (
        await client.post(
            f"/timeline/api/facts/{ids['Ana plays the cello']}/forget", headers=auth(ANA, token="0:forged")
        )
    ).status_code == 401
    # Ben's fact is not Ana's to delete: it looks missing.
    refused = await client.post(f"/timeline/api/facts/{ids['Ben keeps bees']}/forget", headers=auth(ANA))
    assert refused.status_code == 404
    deleted = await client.post(f"/timeline/api/facts/{ids['Ana plays the cello']}/forget", headers=auth(ANA))
    assert deleted.json() == {"forgotten": "Ana plays the cello"}
    again = (await client.get("/timeline/api/facts", headers=auth(ANA))).json()
    assert [f["content"] for g in again["groups"] for f in g["facts"]] == [
        "Ana is going to Porto by night train"
    ]
    assert [
        f["content"]
        for g in (await client.get("/timeline/api/facts", headers=auth(BEN))).json()["groups"]
        for f in g["facts"]
    ] == ["Ben keeps bees"]


@pytest.mark.process
@pytest.mark.skipif(not CHROMIUM_HERE, reason=NO_CHROMIUM)
def test_what_i_remember_in_the_browser(settings_factory: Callable[..., Settings], engine: Any) -> None:
    init_data = sign_init_data(TOKEN, user={"id": ANA, "first_name": "Ana"}, auth_date=int(NOW.timestamp()))
    with serve_seeded(settings_factory(embedder="none"), then=_facts) as base, chromium() as driver:
        driver.get(f"{base}/timeline#{launch_fragment(init_data)}")
        _wait(driver, lambda d: "Day Summary (Today)" in _text(d, "card"), "today's card")
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#memory .fact"), "the facts")
        kinds = [
            h.text.lower() for h in driver.find_elements(By.CSS_SELECTOR, "#memory h3")
        ]  # shown in capitals
        assert kinds == ["you asked me to remember", "from our conversations"]
        facts = {
            f.find_element(By.CSS_SELECTOR, ".text").text: f
            for f in driver.find_elements(By.CSS_SELECTOR, "#memory .fact")
        }
        assert set(facts) == {"Ana plays the cello", "Ana is going to Porto by night train"}  # not Ben's
        porto = facts["Ana is going to Porto by night train"].find_element(By.CSS_SELECTOR, ".fact-day")
        assert porto.get_attribute("data-day") == "2026-03-01"

        # Its day, from the fact.
        porto.click()
        _wait(driver, lambda d: "Day Summary (Sun, Mar 1, 2026)" in _text(d, "card"), "Sunday")
        assert not driver.find_element(By.ID, "memory").is_displayed()

        # Delete one: gone from the page, and still gone when the page asks again.
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_element(By.ID, "memory").is_displayed(), "the memory page again")
        (cello,) = [f for f in driver.find_elements(By.CSS_SELECTOR, "#memory .fact") if "cello" in f.text]
        cello.find_element(By.CSS_SELECTOR, ".forget").click()
        _wait(driver, lambda d: "Forgotten: Ana plays the cello" in _text(d, "status"), "the deletion")
        assert "cello" not in _text(driver, "memory") and "You asked me to remember" not in _text(
            driver, "memory"
        )
        driver.find_element(By.ID, "memory-open").click()
        _wait(
            driver,
            lambda d: "Porto" in _text(d, "memory") and "cello" not in _text(d, "memory"),
            "the list again",
        )
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
