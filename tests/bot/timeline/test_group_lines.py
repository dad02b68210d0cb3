"""The timeline's "Delete my messages in groups": the count and the deletion through the signed API
(both databases), and in the real browser: shown only to someone with lines in groups, asked twice,
their lines blanked and everyone else's kept, their private days untouched."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium.webdriver.common.by import By
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.core.settings import Settings
from bench.fakes.telegram_webapp import launch_fragment, sign_init_data
from db.models import TranscriptMessage
from db.repositories.transcript import TranscriptRepository
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
CLEO = 303  # a member with no private chat
LINES = [
    (ANA, "Ana", "my wordpicnic plan is the lake"),
    (CLEO, "Cleo", "the lake, yes"),
    (ANA, "Ana", "at noon"),
]


async def _group_lines(sessions: async_sessionmaker[AsyncSession]) -> None:
    """Ana's two lines and Cleo's one in a group the bot listens to."""
    group, _ = await group_owner(sessions, chat_id=-100_321, title="Lake", now=NOW, timezone="UTC")
    async with sessions() as session, session.begin():
        for i, (telegram_id, name, text) in enumerate(LINES):
            await TranscriptRepository(session).add(
                user_id=group.id,
                conversation_id=None,
                role="user",
                content=text,
                sent_at=NOW - timedelta(hours=1) + timedelta(minutes=i),
                speaker_telegram_id=telegram_id,
                speaker_name=name,
            )


async def _said(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[int | None, str]]:
    async with sessions() as session:
        rows = await session.execute(
            select(TranscriptMessage.speaker_telegram_id, TranscriptMessage.content)
            .where(TranscriptMessage.speaker_telegram_id.is_not(None))
            .order_by(TranscriptMessage.id)
        )
        return [(r[0], r[1]) for r in rows]


@pytest.mark.both_databases
async def test_group_lines_are_counted_and_blanked_only_for_the_signed_in_person(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Any
) -> None:
    sessions = timeline_runtime.sessions
    await _group_lines(sessions)
    assert (await client.get("/timeline/api/group-lines", headers=auth(ANA))).json() == {"lines": 2}
    assert (await client.get("/timeline/api/group-lines", headers=auth(CLEO))).json() == {"lines": 1}
    assert (await client.get("/timeline/api/group-lines", headers=auth(BEN))).json() == {"lines": 0}
    assert (await client.post("/timeline/api/group-lines/forget")).status_code == 401
    forged = await client.post("/timeline/api/group-lines/forget", headers=auth(ANA, token="0:forged"))
    assert forged.status_code == 401
    assert await _said(sessions) == [(ANA, LINES[0][2]), (CLEO, LINES[1][2]), (ANA, LINES[2][2])]

    done = await client.post("/timeline/api/group-lines/forget", headers=auth(ANA))

    assert done.json() == {"lines": 0}
    assert await _said(sessions) == [(ANA, ""), (CLEO, LINES[1][2]), (ANA, "")]
    assert (await client.get("/timeline/api/group-lines", headers=auth(CLEO))).json() == {"lines": 1}
    # Her private days are hers still: only her group lines went.
    days = (await client.get("/timeline/api/days", headers=auth(ANA))).json()["days"]
    assert sorted(d["day"] for d in days) == ["2026-03-01", "2026-03-02", "2026-03-03"]


@pytest.mark.process
@pytest.mark.skipif(not CHROMIUM_HERE, reason=NO_CHROMIUM)
def test_delete_my_messages_in_groups_in_the_browser(
    settings_factory: Callable[..., Settings], engine: Any
) -> None:
    def signed(telegram_id: int, name: str) -> str:
        user = {"id": telegram_id, "first_name": name}
        return launch_fragment(sign_init_data(TOKEN, user=user, auth_date=int(NOW.timestamp())))

    with (
        serve_seeded(settings_factory(embedder="none"), then=_group_lines) as base,
        chromium() as driver,
    ):
        # Ben never spoke in a group: no such option for him.
        driver.get(f"{base}/timeline#{signed(BEN, 'Ben')}")
        _wait(driver, lambda d: "Day Summary (Today)" in _text(d, "card"), "Ben's card")
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_element(By.ID, "memory").is_displayed(), "Ben's memory page")
        assert not driver.find_elements(By.ID, "group-lines")

        driver.get("about:blank")  # a new page load: the fragment alone is a same-page hash change
        driver.get(f"{base}/timeline#{signed(ANA, 'Ana')}")
        _wait(driver, lambda d: "Day Summary (Today)" in _text(d, "card"), "Ana's card")
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_elements(By.ID, "group-lines"), "the group lines")
        assert "You said 2 messages in groups" in _text(driver, "group-lines")
        driver.find_element(By.ID, "group-lines-delete").click()
        _wait(driver, lambda d: d.find_elements(By.ID, "group-lines-confirm"), "the question")
        assert "deletes the text of all 2 messages in every group" in _text(driver, "group-lines")
        driver.find_element(By.ID, "group-lines-confirm").click()
        _wait(driver, lambda d: "Deleted: your messages in groups." in _text(d, "status"), "the deletion")
        assert not driver.find_elements(By.ID, "group-lines")
        assert "Porto" in _text(driver, "memory") or "Nothing saved" in _text(driver, "memory")

        # Asked again, the page has nothing left to offer.
        driver.find_element(By.ID, "memory-open").click()
        _wait(driver, lambda d: d.find_element(By.ID, "memory").is_displayed(), "the memory page again")
        assert not driver.find_elements(By.ID, "group-lines")
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
