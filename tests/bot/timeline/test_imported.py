"""The timeline shows a chat the person imported from another assistant as theirs with that
assistant, never as a talk with the bot, and to them alone; through the real app, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from bot.runtime import Runtime
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, NOW, ZONE, Seeded
from tests.jobs.import_helpers import import_run, imported_conversation

pytestmark = pytest.mark.both_databases

ASKED = datetime(2024, 3, 12, 18, 30, tzinfo=UTC)


async def _get(client: httpx.AsyncClient, path: str, headers: dict[str, str], **params: str) -> Any:
    response = await client.get(path, headers=headers, params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def test_an_imported_chat_is_shown_as_the_persons_talk_with_chatgpt(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    sessions = timeline_runtime.sessions
    run = await import_run(sessions, seeded.ana_user, at=NOW)
    _, (asked, answered) = await imported_conversation(
        sessions,
        seeded.ana_user,
        run,
        [
            ("user", "which strings suit a baroque cello?", ASKED),
            ("other", "Gut strings are the usual choice.", ASKED + timedelta(minutes=1)),
        ],
        timezone=ZONE,
        today=NOW,
    )

    day = await _get(client, "/timeline/api/days/2024-03-12", auth(ANA))
    entries = [e for block in day["blocks"] for e in block["entries"]]
    assert [(e["id"], e["role"], e["kind"], e.get("speaker")) for e in entries] == [
        (asked, "user", "imported", "You, to ChatGPT"),
        (answered, "other", "imported", "ChatGPT"),
    ]
    opened = await _get(client, f"/timeline/api/messages/{answered}", auth(ANA))
    [message] = opened["messages"]
    assert message["speaker"] == "ChatGPT"
    assert message["content"] == "[ChatGPT, 12 Mar 2024] ChatGPT: Gut strings are the usual choice."
    found = await _get(client, "/timeline/api/search", auth(ANA), q="baroque strings")
    assert any(r["snippet"].startswith("[ChatGPT, 12 Mar 2024] you:") for r in found["results"])

    # Ben sees none of it.
    ben = auth(BEN)
    assert (await client.get(f"/timeline/api/messages/{answered}", headers=ben)).status_code == 404
    assert "baroque" not in (await client.get("/timeline/api/days/2024-03-12", headers=ben)).text
    searched = await client.get("/timeline/api/search", headers=ben, params={"q": "baroque"})
    assert searched.json()["results"] == []
