"""get_context answers from the context package: the persona's active thoughts and the week's day
summaries, the call's user's only."""

from __future__ import annotations

import json
from datetime import timedelta

from agent.core.clock import local_day
from db.models import DaySegment, Thought, UserFact

from .conftest import OpenApp

ALICE, BOB = 701, 702


async def test_get_context_has_the_active_thoughts_and_the_week_of_the_calls_user_only(
    open_app: OpenApp,
) -> None:
    app = await open_app()
    await app.text(ALICE, "Good morning", first_name="Alice")
    await app.text(BOB, "Hey", first_name="Bob")
    alice_call = await app.agent.start(telegram_id=ALICE)
    bob_call = await app.agent.start(telegram_id=BOB)
    alice, bob = alice_call.initiation["user_id"], bob_call.initiation["user_id"]
    now = app.clock.now()
    today = local_day(now, "UTC")
    async with app.runtime.sessions() as session, session.begin():
        for i, content in enumerate(["ask about Marta's visit", "share the Porto photo", "proud of her"]):
            at = now - timedelta(hours=3 - i)
            session.add(Thought(user_id=alice, content=content, dedupe_key=f"a{i}", created_at=at))
        session.add(Thought(user_id=bob, content="Rex the dog", dedupe_key="b", created_at=now))
        for user_id, days_ago, summary in (
            (alice, 2, "## Summary\nAlice packed boxes for Porto.\n## Goals\n- move"),
            (alice, 9, "Alice was in Lisbon."),
            (bob, 3, "Bob walked Rex by the river."),
        ):
            at = now - timedelta(days=days_ago)
            session.add(
                DaySegment(
                    user_id=user_id,
                    day=today - timedelta(days=days_ago),
                    timezone="UTC",
                    first_message_at=at,
                    last_message_at=at,
                    summary=summary,
                )
            )

    answer = await alice_call.tool("get_context")
    assert answer.status_code == 200, answer.text
    package = answer.json()["result"]
    assert [t["thought"] for t in package["active_thoughts"]] == [
        "proud of her",
        "share the Porto photo",
        "ask about Marta's visit",
    ]
    day = today - timedelta(days=2)
    assert package["week"] == [
        {"day": day.isoformat(), "weekday": f"{day:%A}", "summary": "Alice packed boxes for Porto."}
    ]
    dumped = json.dumps(package)
    assert "Rex" not in dumped and "Lisbon" not in dumped

    bob_package = (await bob_call.tool("get_context")).json()["result"]
    assert [t["thought"] for t in bob_package["active_thoughts"]] == ["Rex the dog"]
    assert [d["summary"] for d in bob_package["week"]] == ["Bob walked Rex by the river."]
    assert "Porto" not in json.dumps(bob_package)


async def test_get_context_reads_the_one_list_of_facts_profile_first_hidden_left_out(
    open_app: OpenApp,
) -> None:
    app = await open_app()
    await app.text(ALICE, "Good morning", first_name="Alice")
    await app.text(BOB, "Hey", first_name="Bob")
    alice_call = await app.agent.start(telegram_id=ALICE)
    bob_call = await app.agent.start(telegram_id=BOB)
    alice, bob = alice_call.initiation["user_id"], bob_call.initiation["user_id"]
    at = app.clock.now() - timedelta(days=3)
    async with app.runtime.sessions() as session, session.begin():
        for owner, content, pinned, hidden in (
            (alice, "Alice works as a nurse", False, False),
            (alice, "Alice is allergic to cats", True, False),
            (alice, "Alice's divorce was hard on her", False, True),
            (bob, "Bob keeps bees", False, False),
        ):
            session.add(
                UserFact(
                    user_id=owner,
                    content=content,
                    source="extraction",
                    pinned=pinned,
                    hidden=hidden,
                    dedupe_key=content.lower(),
                    created_at=at,
                )
            )

    memory = (await alice_call.tool("get_context")).json()["result"]["memory"]
    # The profile's facts, the pinned one first; the hidden one (never brought up unasked) and
    # another person's fact are not there; without a graph its two groups are empty.
    assert memory["user_facts"] == [
        {"text": "Alice is allergic to cats", "since": at.date().isoformat(), "in_profile": True},
        {"text": "Alice works as a nurse", "since": at.date().isoformat(), "in_profile": True},
    ]
    assert memory["relationship_episodes"] == [] and memory["persona_events"] == []
    bob_memory = (await bob_call.tool("get_context")).json()["result"]["memory"]
    assert [f["text"] for f in bob_memory["user_facts"]] == ["Bob keeps bees"]
