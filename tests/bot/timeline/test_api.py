"""The timeline's API through the real Starlette app, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from sqlalchemy import select

from bot.runtime import Runtime
from bot.web.serve import build_pages_app
from db.models import DaySegment, TranscriptMessage
from jobs.registry import run_job
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, SUMMARY_2, Seeded

pytestmark = pytest.mark.both_databases


async def _get(client: httpx.AsyncClient, path: str, headers: dict[str, str], **params: str) -> Any:
    response = await client.get(path, headers=headers, params=params)
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-store"
    return response.json()


def _entries(day: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for block in day["blocks"] for e in block["entries"]]


async def test_the_page_is_a_shell_with_our_own_script_and_a_strict_policy(
    client: httpx.AsyncClient, seeded: Seeded
) -> None:
    page = await client.get("/timeline")
    assert page.status_code == 200
    assert '<script src="/timeline/static/timeline.js?v=' in page.text
    assert "Elgar" not in page.text  # no data without a signed request
    policy = page.headers["content-security-policy"]
    assert "script-src 'self' https://telegram.org" in policy and "connect-src 'self'" in policy
    script = await client.get("/timeline/static/timeline.js")
    assert script.status_code == 200 and "tgWebAppData" in script.text


async def test_days_lists_the_days_with_messages_in_the_users_time_zone(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    data = await _get(client, "/timeline/api/days", auth(ANA))
    assert data["user"] == {"name": "Ana", "timezone": "Europe/Berlin"}
    assert (data["today"], data["yesterday"]) == ("2026-03-03", "2026-03-02")
    assert data["days"] == [
        {"day": "2026-03-03", "messages": 3, "summarised": False, "final": False},
        {"day": "2026-03-02", "messages": 6, "summarised": True, "final": False},
        {"day": "2026-03-01", "messages": 3, "summarised": True, "final": True},
    ]


async def test_a_day_shows_its_card_and_folds_what_its_summary_covers(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    day = await _get(client, "/timeline/api/days/2026-03-02", auth(ANA))

    card = day["card"]
    assert card["summary_markdown"] == SUMMARY_2
    assert [s["title"] for s in card["sections"]] == [
        "Summary",
        "Goals",
        "Decisions",
        "Open loops",
        "Next steps",
    ]
    assert card["sections"][1]["items"] == ["play the Elgar concerto well"]
    assert card["updated_time"] == "09:08"  # Berlin time of the fourth message
    # The covered messages folded, the note after them, the rest open.
    kinds = [(b["type"], [e["type"] for e in b["entries"]]) for b in day["blocks"]]
    assert kinds == [
        ("folded", ["message"] * 4),
        ("entry", ["note"]),
        ("entry", ["compaction"]),
        ("entry", ["message"]),
        ("entry", ["message"]),
    ]
    folded = day["blocks"][0]["entries"]
    assert folded[0]["content"] == "Rehearsal went long today, the Elgar is hard."
    assert (folded[0]["time"], folded[0]["role"], folded[0]["covered"]) == ("09:05", "user", True)
    note = day["blocks"][1]["entries"][0]
    assert (note["role"], note["kind"], note["content"]) == ("system", "note", "day summary updated")
    compaction = day["blocks"][2]["entries"][0]
    assert compaction["content"].startswith("Ana and Nikita discussed the Elgar")
    last = day["blocks"][4]["entries"][0]
    assert (last["content"], last["covered"]) == ("Ask her, she offered last time.", False)


async def test_a_finalised_day_and_a_day_without_summary(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    sunday = await _get(client, "/timeline/api/days/2026-03-01", auth(ANA))
    assert sunday["card"]["status"] == "final"
    assert [b["type"] for b in sunday["blocks"]] == ["folded", "entry"]
    assert _entries(sunday)[-1]["content"] == "day summary finalised"
    today = await _get(client, "/timeline/api/days/2026-03-03", auth(ANA))
    assert today["card"]["summary_markdown"] is None
    # Nothing covered; the bot's follow-up is marked as one.
    assert [(e["covered"], e["kind"]) for e in _entries(today)] == [
        (False, "text"),
        (False, "text"),
        (False, "proactive"),
    ]
    empty = await _get(client, "/timeline/api/days/2026-02-11", auth(ANA))
    assert (empty["card"], empty["blocks"]) == (None, [])
    bad = await client.get("/timeline/api/days/yesterday", headers=auth(ANA))
    assert bad.status_code == 400


async def test_search_has_the_seeds_fields_and_its_scope(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    everywhere = await _get(client, "/timeline/api/search", auth(ANA), q="Elgar concerto", scope="all")
    kinds = [r["kind"] for r in everywhere["results"]]
    assert kinds[0] == "summary" and "message" in kinds
    summary = everywhere["results"][0]
    assert (summary["day_label"], summary["day_segment_id"]) == ("2026-03-02", seeded.segments["monday"])
    assert "Elgar" in summary["summary_snippet"] and summary["score"] > 0
    message = next(r for r in everywhere["results"] if r["kind"] == "message")
    assert {"day_label", "score", "covered_by_summary", "snippet", "message_id"} <= set(message)

    only_sunday = await _get(
        client, "/timeline/api/search", auth(ANA), q="train", scope="day", day="2026-03-01"
    )
    assert {r["day_label"] for r in only_sunday["results"]} == {"2026-03-01"}
    elsewhere = await _get(
        client, "/timeline/api/search", auth(ANA), q="train", scope="day", day="2026-03-02"
    )
    assert elsewhere["results"] == []
    assert (await client.get("/timeline/api/search", headers=auth(ANA), params={"q": " "})).status_code == 400


async def test_a_folded_message_is_the_one_search_calls_covered(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    day = {e["id"]: e for e in _entries(await _get(client, "/timeline/api/days/2026-03-02", auth(ANA)))}
    for query, message_id in (("metronome", None), ("Marta", seeded.messages["marta"])):
        found = await _get(client, "/timeline/api/search", auth(ANA), q=query, scope="all")
        hit = next(r for r in found["results"] if r["kind"] == "message")
        if message_id is not None:
            assert hit["message_id"] == message_id
        assert hit["covered_by_summary"] is day[hit["message_id"]]["covered"]
    assert day[seeded.messages["rehearsal"]]["covered"] and not day[seeded.messages["marta"]]["covered"]


async def test_open_returns_the_exact_message_or_the_days_summary(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    opened = await _get(client, f"/timeline/api/messages/{seeded.messages['marta']}", auth(ANA))
    assert opened["messages"] == [
        {
            "message_id": seeded.messages["marta"],
            "role": "user",
            "content": "Do you think Marta would turn pages for me?",
            "created_at": "2026-03-02T08:09:00+00:00",
            "day_segment_id": seeded.segments["monday"],
        }
    ]
    summary = await _get(client, f"/timeline/api/summaries/{seeded.segments['sunday']}", auth(ANA))
    assert summary["day_label"] == "2026-03-01" and summary["summary_markdown"].startswith(
        "## Summary\nAna planned"
    )
    assert summary["sections"][2] == {"title": "Decisions", "text": "", "items": ["take the night train"]}


async def test_another_user_sees_none_of_it(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    ben = auth(BEN, first_name="Ben")
    days = await _get(client, "/timeline/api/days", ben)
    assert [d["day"] for d in days["days"]] == ["2026-03-02"]
    monday = await _get(client, "/timeline/api/days/2026-03-02", ben)
    assert [e["content"] for e in _entries(monday)] == ["My zeppelin model is finished.", "Wow!"]
    assert monday["card"]["day_segment_id"] == seeded.segments["ben"]
    for query in ("Elgar", "Marta", "Porto train"):
        assert (await _get(client, "/timeline/api/search", ben, q=query, scope="all"))["results"] == []
    assert (
        await client.get(f"/timeline/api/messages/{seeded.messages['marta']}", headers=ben)
    ).status_code == 404
    summary = await client.get(f"/timeline/api/summaries/{seeded.segments['monday']}", headers=ben)
    assert summary.status_code == 404
    assert (await client.post("/timeline/api/days/2026-03-01/regenerate", headers=ben)).status_code == 404
    # And Ana does not see Ben's.
    assert (await _get(client, "/timeline/api/search", auth(ANA), q="zeppelin", scope="all"))["results"] == []
    assert (
        await client.get(f"/timeline/api/messages/{seeded.messages['zeppelin']}", headers=auth(ANA))
    ).status_code == 404
    async with timeline_runtime.sessions() as session:
        requested = await session.scalar(
            select(DaySegment.regenerate_requested_at).where(DaySegment.id == seeded.segments["sunday"])
        )
    assert requested is None


async def test_someone_who_never_wrote_gets_an_empty_timeline(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    stranger = auth(303, first_name="Eve")
    days = await _get(client, "/timeline/api/days", stranger)
    assert (days["user"], days["days"]) == (None, [])
    assert (await _get(client, "/timeline/api/search", stranger, q="Elgar"))["results"] == []
    assert (
        await client.get(f"/timeline/api/messages/{seeded.messages['marta']}", headers=stranger)
    ).status_code == 404


async def test_regenerate_queues_the_day_summary_job_and_is_rate_limited(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    path = "/timeline/api/days/2026-03-02/regenerate"
    first = await client.post(path, headers=auth(ANA))
    assert (first.status_code, first.json()) == (200, {"status": "queued"})
    assert (await client.post(path, headers=auth(ANA))).json() == {"status": "already_queued"}
    limited = await client.post(path, headers=auth(ANA))  # TIMELINE_REGENERATE_PER_MINUTE=2
    assert limited.status_code == 429 and "try again in a minute" in limited.json()["error"]
    # Counted in the database like the bot's other limits: a second web app (another instance, or
    # this one restarted) refuses too.
    transport = httpx.ASGITransport(app=build_pages_app(timeline_runtime))
    async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as other:
        assert (await other.post(path, headers=auth(ANA))).status_code == 429
    assert (
        await client.post("/timeline/api/days/2026-02-11/regenerate", headers=auth(BEN))
    ).status_code == 404
    pending = await _get(client, "/timeline/api/days/2026-03-02", auth(ANA))
    assert pending["card"]["regenerate_pending"] is True

    assert (await run_job("day-summaries", timeline_runtime.jobs))["updated"] == 1

    after = await _get(client, "/timeline/api/days/2026-03-02", auth(ANA))
    assert after["card"]["regenerate_pending"] is False
    assert after["card"]["summary_markdown"] != SUMMARY_2
    # Every message is covered now, folded in front of the new note.
    assert [b["type"] for b in after["blocks"]][-2:] == ["folded", "entry"]
    assert _entries(after)[-1]["content"] == "day summary regenerated"
    async with timeline_runtime.sessions() as session:
        notes = await session.scalars(
            select(TranscriptMessage.content)
            .where(
                TranscriptMessage.day_segment_id == seeded.segments["monday"],
                TranscriptMessage.kind == "note",
            )
            .order_by(TranscriptMessage.id)
        )
        assert list(notes) == ["day summary updated", "day summary regenerated"]
