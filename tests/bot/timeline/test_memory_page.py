"""The timeline's "What I remember": the facts API with initData checked, only the signed-in person's
facts, another person's fact refused as missing and a bad rewording refused with a clear 400 (both
databases); and the page in the real browser: the profile first, a fact pinned, hidden, reworded and
deleted, its day opened, and the page and the next /memory agreeing."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from agent.memory.listing import listing_of
from agent.memory.profile import SECTIONS
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from bot.handlers.memory_facts import page_message, paged
from db.engine import create_engine, session_factory
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
from tests.facts import add_facts

CHROMIUM_HERE = all(Path(p).exists() for p in (CHROMIUM, CHROMEDRIVER))


async def _facts(sessions: async_sessionmaker[AsyncSession]) -> dict[str, int]:
    """Ana: one fact from her Sunday message, one she asked to be saved; Ben: one of his own."""
    async with sessions() as session, session.begin():
        users = dict((await session.execute(select(User.telegram_id, User.id))).all())
        sunday = await session.scalar(
            select(TranscriptMessage.id).where(TranscriptMessage.content.like("%night train to Porto%"))
        )
        reply = await session.scalar(
            select(TranscriptMessage.id).where(TranscriptMessage.content.like("Wonderful, which day%"))
        )
        repo = FactRepository(session)
        # Named with the companion's answer too: only Ana's own line is her fact's source.
        await repo.add_sourced(
            users[ANA],
            None,
            [("Ana is going to Porto by night train", [sunday, reply])],
            NOW,
            source="extraction",
        )
        await add_facts(repo, users[ANA], None, ["Ana plays the cello"], NOW, source="tool")
        await add_facts(repo, users[BEN], None, ["Ben keeps bees"], NOW, source="tool")
        return dict((await session.execute(select(UserFact.content, UserFact.id))).all())


FLAG_ROUTES = ("pin", "unpin", "hide", "show", "forget")


def _contents(listing: dict[str, Any], part: str) -> list[str]:
    return [f["content"] for f in listing[part]]


@pytest.mark.both_databases
async def test_facts_are_listed_and_changed_only_for_the_signed_in_user(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Any
) -> None:
    ids = await _facts(timeline_runtime.sessions)
    cello, porto, bees = (
        ids["Ana plays the cello"],
        ids["Ana is going to Porto by night train"],
        ids["Ben keeps bees"],
    )
    listed = (await client.get("/timeline/api/facts", headers=auth(ANA))).json()
    shown = {f.pop("id"): f for f in listed["profile"]}
    assert all(f.pop("section") in SECTIONS for f in shown.values())
    assert shown == {
        cello: {
            "content": "Ana plays the cello",
            "day": "2026-03-03",
            "source": "you asked me to remember",
            "pinned": False,
            "hidden": False,
            "standing": "profile",
            "sources": {
                "origin": "asked",
                "says": "you asked me to remember this on 3 Mar 2026",
                "learned": "2026-03-03T10:00+01:00",
                "lines": [],
                "more": 0,
            },
        },
        porto: {
            "content": "Ana is going to Porto by night train",
            "day": "2026-03-01",
            "source": "from our conversations",
            "pinned": False,
            "hidden": False,
            "standing": "profile",
            "sources": {
                "origin": "said",
                "says": "you said on 1 Mar 2026: “I booked the night train to Porto!”",
                "learned": "2026-03-03T10:00+01:00",
                "lines": [
                    {
                        "text": "I booked the night train to Porto!",
                        "at": "2026-03-01T18:00+01:00",
                        "day": "2026-03-01",
                    }
                ],
                "more": 0,
            },
        },
    }
    assert (listed["rest"], listed["more"], listed["max_chars"]) == ([], 0, 300)
    assert 0 < listed["tokens"] <= listed["budget"]

    # Without a sign-in, or with a forged one, every route answers 401.
    forged = auth(ANA, token="0:forged")
    assert (await client.get("/timeline/api/facts")).status_code == 401
    assert (await client.get("/timeline/api/facts", headers=forged)).status_code == 401
    for route in (*FLAG_ROUTES, "reword"):
        for headers in ({}, forged):
            answer = await client.post(
                f"/timeline/api/facts/{cello}/{route}", headers=headers, json={"content": "x"}
            )
            assert answer.status_code == 401, route

    # Ben's fact is not Ana's to change: it looks missing, whatever the change.
    for route in FLAG_ROUTES:
        refused = await client.post(f"/timeline/api/facts/{bees}/{route}", headers=auth(ANA))
        assert (refused.status_code, refused.json()) == (404, {"error": "not found"}), route
    refused = await client.post(
        f"/timeline/api/facts/{bees}/reword", headers=auth(ANA), json={"content": "Ana keeps bees"}
    )
    assert refused.status_code == 404

    # A rewording that cannot be a fact is refused, saying why; nothing changes.
    for body, says in (
        ({"content": ""}, "empty"),
        ({"content": "   "}, "empty"),
        ({"content": "x" * 301}, "at most 300 characters; this one has 301"),
        ({"content": 5}, '{"content": "..."}'),
        ([], '{"content": "..."}'),
    ):
        bad = await client.post(f"/timeline/api/facts/{cello}/reword", headers=auth(ANA), json=body)
        assert bad.status_code == 400 and says in bad.json()["error"], body
    for raw in (b"not json", b'{"content": "' + b"x" * 20_000 + b'"}'):
        bad = await client.post(f"/timeline/api/facts/{cello}/reword", headers=auth(ANA), content=raw)
        assert bad.status_code == 400 and bad.json()["error"], raw[:20]
    assert (await client.post("/timeline/api/facts/12a/pin", headers=auth(ANA))).status_code == 400
    for beyond in (2**63, "9" * 5000, 0):  # no stored id: missing, never a driver's overflow
        assert (await client.post(f"/timeline/api/facts/{beyond}/hide", headers=auth(ANA))).status_code == 404

    # Ana pins, hides, rewords and deletes her own: each answer is the listing as it now stands.
    pinned = (await client.post(f"/timeline/api/facts/{cello}/pin", headers=auth(ANA))).json()
    assert pinned["fact_id"] == cello and pinned["profile"][0]["content"] == "Ana plays the cello"
    assert pinned["profile"][0]["pinned"]
    hidden = (await client.post(f"/timeline/api/facts/{porto}/hide", headers=auth(ANA))).json()
    assert _contents(hidden, "profile") == ["Ana plays the cello"]
    assert [(f["content"], f["standing"]) for f in hidden["rest"]] == [
        ("Ana is going to Porto by night train", "hidden")
    ]
    worded = await client.post(
        f"/timeline/api/facts/{cello}/reword",
        headers=auth(ANA),
        json={"content": " Ana plays the  cello in a quartet "},
    )
    assert _contents(worded.json(), "profile") == ["Ana plays the cello in a quartet"]
    deleted = (await client.post(f"/timeline/api/facts/{porto}/forget", headers=auth(ANA))).json()
    assert deleted["forgotten"] == "Ana is going to Porto by night train" and deleted["rest"] == []
    assert (await client.post(f"/timeline/api/facts/{porto}/show", headers=auth(ANA))).status_code == 404
    ben = (await client.get("/timeline/api/facts", headers=auth(BEN))).json()
    assert _contents(ben, "profile") == ["Ben keeps bees"] and not ben["profile"][0]["hidden"]


def _on_page(driver: Any, list_id: str) -> list[tuple[str, bool]]:
    """(words, pinned) of each fact of one list on the page, in its order."""
    items = driver.find_elements(By.CSS_SELECTOR, f"#{list_id} .fact")
    return [
        (i.find_element(By.CSS_SELECTOR, ".text").text, "pinned" in i.get_attribute("class")) for i in items
    ]


def _fact(driver: Any, words: str) -> Any:
    (item,) = [f for f in driver.find_elements(By.CSS_SELECTOR, "#memory .fact") if words in f.text]
    return item


async def _memory_command(settings: Settings) -> str:
    """The text of the first page /memory would send Ana now."""
    engine = create_engine(settings.database_url)
    try:
        sessions = session_factory(engine)
        async with sessions() as session:
            ana = await session.scalar(select(User).where(User.telegram_id == ANA))
        assert ana is not None
        listing = await listing_of(sessions, ana.id, ana.timezone, now=NOW, settings=settings)
        return page_message(paged(listing, 1))[0]
    finally:
        await engine.dispose()


@pytest.mark.process
@pytest.mark.skipif(not CHROMIUM_HERE, reason=NO_CHROMIUM)
def test_what_i_remember_in_the_browser(settings_factory: Callable[..., Settings], engine: Any) -> None:
    settings = settings_factory(embedder="none")
    init_data = sign_init_data(TOKEN, user={"id": ANA, "first_name": "Ana"}, auth_date=int(NOW.timestamp()))
    with serve_seeded(settings, then=_facts) as base, chromium() as driver:
        driver.get(f"{base}/timeline#{launch_fragment(init_data)}")
        _wait(driver, lambda d: "Day Summary (Today)" in _text(d, "card"), "today's card")
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#memory .fact"), "the facts")
        profile = _on_page(driver, "profile-facts")
        assert sorted(profile) == [
            ("Ana is going to Porto by night train", False),
            ("Ana plays the cello", False),
        ]
        assert "Ben" not in _text(driver, "memory")
        porto = _fact(driver, "Porto").find_element(By.CSS_SELECTOR, ".fact-day")
        assert porto.get_attribute("data-day") == "2026-03-01"
        # Where each comes from: her own line, quoted with its day; the cello, at her asking.
        source = _fact(driver, "Porto").find_element(By.CSS_SELECTOR, ".fact-source")
        assert source.text == "You said, Sun, Mar 1, 2026: I booked the night train to Porto!"
        assert source.find_element(By.TAG_NAME, "q").text == "I booked the night train to Porto!"
        cello = _fact(driver, "cello").find_element(By.CSS_SELECTOR, ".fact-source").text
        assert cello == "You asked me to remember this (Today)."

        # Its day, from the fact.
        porto.click()
        _wait(driver, lambda d: "Day Summary (Sun, Mar 1, 2026)" in _text(d, "card"), "Sunday")
        assert not driver.find_element(By.ID, "memory").is_displayed()
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_element(By.ID, "memory").is_displayed(), "the memory page again")

        # Pin the cello: first in the profile, marked.
        _fact(driver, "cello").find_element(By.CSS_SELECTOR, ".pin").click()
        _wait(driver, lambda d: "Pinned: Ana plays the cello" in _text(d, "status"), "the pin")
        assert _on_page(driver, "profile-facts")[0] == ("Ana plays the cello", True)
        assert _fact(driver, "cello").find_element(By.CSS_SELECTOR, ".pin").text == "Unpin"

        # Don't bring up the trip: out of the profile, kept below with its mark.
        _fact(driver, "Porto").find_element(By.CSS_SELECTOR, ".hide").click()
        _wait(driver, lambda d: "I won't bring it up: Ana is going" in _text(d, "status"), "the hiding")
        assert _on_page(driver, "rest-facts") == [("Ana is going to Porto by night train", False)]
        assert "not brought up unless you ask" in _fact(driver, "Porto").text

        # Reword the cello: an empty wording is refused, saying why, and the field stays for another try.
        _fact(driver, "cello").find_element(By.CSS_SELECTOR, ".reword").click()
        field = _wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".reword-input"), "the field")[0]
        field.clear()
        field.send_keys(Keys.ENTER)
        _wait(driver, lambda d: "empty" in _text(d, "status"), "the refusal")
        field.send_keys("Ana plays the cello in a quartet", Keys.ENTER)
        _wait(
            driver,
            lambda d: "Reworded: Ana plays the cello in a quartet" in _text(d, "status"),
            "the rewording",
        )
        assert _on_page(driver, "profile-facts") == [("Ana plays the cello in a quartet", True)]

        # The page and the next /memory agree: the same profile, the same kept fact.
        memory = asyncio.run(_memory_command(settings))
        assert (
            "In your profile, which I read every time we talk:\n1. 📌 Ana plays the cello in a quartet\n"
            "   ↳ you asked me to remember this on 3 Mar 2026\n\n"
            "Kept, but I don't bring these up unless you ask:\n2. Ana is going to Porto by night train\n"
            "   ↳ you said on 1 Mar 2026: “I booked the night train to Porto!”"
        ) in memory

        # Delete the trip: gone from the page and from /memory.
        _fact(driver, "Porto").find_element(By.CSS_SELECTOR, ".forget").click()
        _wait(
            driver,
            lambda d: "Forgotten: Ana is going to Porto by night train" in _text(d, "status"),
            "the deletion",
        )
        assert not driver.find_elements(By.ID, "rest-facts") and "Porto" not in _text(driver, "memory")
        assert "Porto" not in asyncio.run(_memory_command(settings))
        driver.find_element(By.ID, "memory-open").click()
        _wait(
            driver,
            lambda d: "quartet" in _text(d, "memory") and "Porto" not in _text(d, "memory"),
            "the list again",
        )
        errors = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        # The one refusal asked for above is the browser's only complaint.
        assert [
            e
            for e in errors
            if not e.endswith(
                "reword - Failed to load resource: the server responded with a status of 400 (Bad Request)"
            )
        ] == []
        assert len(errors) == 1
