"""/export of a large user: streamed page by page into parts that each stay under the size
limit, are valid JSON on their own, and deep-merge into exactly the one-document export."""

from __future__ import annotations

import json
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.export import PAGE_ROWS, PartWriter, export_events
from agent.account.forget import export_user
from agent.account.users import get_or_create_user
from bench.clock import FrozenClock
from db.models import Conversation, TranscriptMessage, UserFact
from db.repositories.facts import FactRepository
from tests.facts import add_facts

pytestmark = pytest.mark.both_databases

MESSAGES = 8 * PAGE_ROWS + 17  # several pages, and a last page that is not full
PART_BYTES = 200_000


class GraphLikeStore:
    """An external store whose export nests lists inside objects, as the knowledge graph's does."""

    name = "knowledge_graph"

    async def export_user(self, user_id: int) -> Any:
        facts = [{"fact": f"fact {n} " + "x" * 300} for n in range(700)]
        return {
            "backend": "test",
            "groups": {"user": {"facts": facts, "entities": []}, "persona": {"facts": []}},
        }

    async def forget_user(self, user_id: int) -> None:
        return None


def deep_merge(into: dict[str, Any], part: dict[str, Any]) -> dict[str, Any]:
    """Objects merge key by key, lists concatenate: how docs/privacy.md says to join the parts."""
    for key, value in part.items():
        if key not in into:
            into[key] = value
        elif isinstance(value, dict):
            deep_merge(into[key], value)
        elif isinstance(value, list):
            into[key].extend(value)
        else:
            assert into[key] == value, key
    return into


async def large_user(sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, key: str) -> int:
    user, _ = await get_or_create_user(sessions, key=key, now=clock.now(), timezone="UTC", name="Tal")
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user.id, status="active", started_at=clock.now(), last_message_at=clock.now(), messages=[]
        )
        session.add(conversation)
        await session.flush()
        # One executemany rather than an object per row: the rows are the export's input, not the test.
        await session.execute(
            insert(TranscriptMessage),
            [
                {
                    "user_id": user.id,
                    "conversation_id": conversation.id,
                    "role": "user" if n % 2 == 0 else "assistant",
                    "content": f"message {n}: " + "é" * 200,  # two bytes each in UTF-8
                    "sent_at": clock.now() + timedelta(seconds=n),
                }
                for n in range(MESSAGES)
            ],
        )
        session.add(
            UserFact(
                user_id=user.id,
                content="Tal talks a lot",
                dedupe_key=f"f{conversation.id}",
                created_at=clock.now(),
            )
        )
    return user.id


@pytest.mark.slow
async def test_a_large_export_comes_in_parts_that_merge_into_the_document(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user_id = await large_user(sessions, clock, "cli:talker")
    stores = [GraphLikeStore()]

    tracemalloc.start()
    try:
        parts = await PartWriter(tmp_path, part_bytes=PART_BYTES).write_all(
            export_events(sessions, user_id, stores)
        )
        streamed_peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        whole = await export_user(sessions, user_id, stores)
        whole_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    total = sum(p.stat().st_size for p in parts)
    assert len(parts) >= total // PART_BYTES >= 5
    assert [p.name for p in parts] == [
        f"nikita-export-{i}-of-{len(parts)}.json" for i in range(1, len(parts) + 1)
    ]
    merged: dict[str, Any] = {}
    for number, path in enumerate(parts, start=1):
        assert path.stat().st_size <= PART_BYTES
        document = json.loads(path.read_bytes())  # each part is valid JSON on its own
        assert document.pop("export") == {"format": "nikita-export/2", "part": number}
        deep_merge(merged, document)
    assert merged == whole
    assert len(whole["messages"]) == MESSAGES and [m["id"] for m in whole["messages"]] == sorted(
        m["id"] for m in whole["messages"]
    )
    assert len(whole["knowledge_graph"]["groups"]["user"]["facts"]) == 700
    assert whole["knowledge_graph"]["groups"]["persona"]["facts"] == []
    # Streaming holds a page of rows, not the document: less than building it whole, and no more
    # for a user twice as large (building it whole takes twice as much).
    assert streamed_peak < whole_peak / 2, (streamed_peak, whole_peak)
    twice = await large_user(sessions, clock, "cli:talker2")
    await large_user(sessions, clock, "cli:talker2")
    (tmp_path / "twice").mkdir()
    tracemalloc.start()
    try:
        await PartWriter(tmp_path / "twice", part_bytes=PART_BYTES).write_all(
            export_events(sessions, twice, stores)
        )
        twice_streamed_peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert twice_streamed_peak < streamed_peak * 1.3, (streamed_peak, twice_streamed_peak)


async def test_a_small_export_is_one_document_as_before(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    user, _ = await get_or_create_user(sessions, key="cli:quiet", now=clock.now(), timezone="UTC", name="Q")
    parts = await PartWriter(tmp_path, part_bytes=PART_BYTES).write_all(export_events(sessions, user.id))
    assert [p.name for p in parts] == ["nikita-export.json"]
    document = json.loads(parts[0].read_bytes())
    assert document.pop("export") == {"format": "nikita-export/2", "part": 1}
    assert document == await export_user(sessions, user.id)
    assert document["user"]["name"] == "Q" and document["messages"] == []


async def test_facts_carry_their_flags_reinforcement_plan_date_and_what_superseded_them(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana")
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        await add_facts(facts, user.id, None, ["Lives in Lisbon", "Likes tea"], clock.now(), source="tool")
        await add_facts(facts, user.id, None, ["likes tea"], clock.now() + timedelta(hours=1), source="tool")
        await add_facts(facts, user.id, None, ["Lives in Porto"], clock.now(), source="tool")
        held = {f.content: f for f in await facts.held(user.id)}
        await facts.supersede(
            user.id,
            [held["Lives in Lisbon"].id],
            by=held["Lives in Porto"].id,
            at=clock.now(),
            reason="moved",
        )
        await facts.set_flags(user.id, held["Likes tea"].id, clock.now(), pinned=True, hidden=True)
        held["Lives in Porto"].valid_until = clock.now() + timedelta(days=30)
    exported = {f["content"]: f for f in (await export_user(sessions, user.id))["facts"]}
    lisbon, tea, porto = exported["Lives in Lisbon"], exported["Likes tea"], exported["Lives in Porto"]
    assert lisbon["superseded_by"] == porto["id"] and lisbon["invalid_reason"] == "moved"
    assert (tea["pinned"], tea["hidden"], tea["reinforced"]) == (True, True, 2)
    assert tea["last_seen_at"] == (clock.now() + timedelta(hours=1)).isoformat()
    assert porto["valid_until"] == (clock.now() + timedelta(days=30)).isoformat()
    assert (porto["pinned"], porto["hidden"], porto["superseded_by"]) == (False, False, None)
