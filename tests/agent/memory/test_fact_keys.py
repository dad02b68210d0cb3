"""A fact as a key of the turn that said it: it leads a search to that turn while it is held, and the
key goes with the fact when the person takes it back (memory_forget) and, with the day summaries
(keys of their days), on /forget."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.memory.corrections import end_facts
from agent.memory.units import KIND_FACT_CHUNK, FactUnits
from agent.search.recall import Recall
from db.models import DaySegment, SearchChunk, UserFact
from db.repositories.facts import FactRepository
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
# An instruction said once; the request that needs it later shares no word with the turn itself.
TURNS = [
    "Oh and one more thing about how you reply to me",
    "Sure, tell me",
    "Bullet points please, every single time",
    "Noted!",
]
FACT = "The user asked: always answer in bullet points, in English"
QUERY = "In which format should answers be written in English?"


async def _ids(recall: Recall, user_id: int, query: str) -> list[int]:
    return [h.message_id for h in await recall.search(user_id, query, now=NOW) if h.message_id]


async def _two_people(
    sessions: async_sessionmaker[AsyncSession],
) -> tuple[tuple[int, list[int]], tuple[int, list[int]]]:
    """Ann and Bob, each with the same day and the same fact learnt from its third turn."""
    people = []
    for key in ("cli:ann", "cli:bob"):
        user = await add_user(sessions, key)
        _, ids = await add_day(
            sessions, user, date(2026, 2, 10), TURNS, summary="A short chat about replies."
        )
        async with sessions() as session, session.begin():
            await FactRepository(session).add_sourced(
                user, None, [(FACT, [ids[2]])], NOW, source="extraction"
            )
        people.append((user, ids))
    return people[0], people[1]


async def _keys(sessions: async_sessionmaker[AsyncSession], user_id: int) -> int:
    async with sessions() as session:
        count = await session.scalar(
            select(func.count(SearchChunk.id)).where(
                SearchChunk.user_id == user_id, SearchChunk.kind == KIND_FACT_CHUNK
            )
        )
    return int(count or 0)


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_a_fact_key_goes_with_the_fact_taken_back(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    (ann, ids), (bob, bobs) = await _two_people(sessions)
    recall = make_recall(recall_settings(), sessions, vectors=vectors)
    assert isinstance(recall.units, FactUnits)

    held = await _ids(recall, ann, QUERY)
    assert held[0] == ids[2]
    assert await _keys(sessions, ann) == (1 if vectors else 0)

    async with sessions() as session, session.begin():
        fact_id = await session.scalar(select(UserFact.id).where(UserFact.user_id == ann))
        assert fact_id is not None
        ended = await end_facts(session, recall.units, ann, [fact_id], reason="it was wrong", at=NOW)
    assert ended == 1

    # The turn's own words hold nothing of the question: without its fact, full text finds nothing.
    after = await _ids(recall, ann, QUERY)
    if not vectors:
        assert after == []
    else:
        assert ids[2] not in after[:1]
    assert await _keys(sessions, ann) == 0
    # Bob's key of the same words is his own and stays.
    assert (await _ids(recall, bob, QUERY))[0] == bobs[2]


async def test_fact_keys_go_with_forget(sessions: async_sessionmaker[AsyncSession]) -> None:
    (ann, ids), (bob, bobs) = await _two_people(sessions)
    recall = make_recall(recall_settings(), sessions)
    assert (await _ids(recall, ann, QUERY))[0] == ids[2]
    assert (await _ids(recall, bob, QUERY))[0] == bobs[2]
    assert (await _keys(sessions, ann), await _keys(sessions, bob)) == (1, 1)
    assert recall.units is not None and recall.units.holds(ann)

    result = await forget_user(sessions, ann, [recall])

    assert result.found and result.stores_pending == ()
    assert (await _keys(sessions, ann), await _keys(sessions, bob)) == (0, 1)
    async with sessions() as session:  # the day summaries, keys of their days, and their vectors too
        for table, owner in ((SearchChunk, SearchChunk.user_id), (DaySegment, DaySegment.user_id)):
            assert await session.scalar(select(func.count()).select_from(table).where(owner == ann)) == 0
    assert not recall.units.holds(ann) and not recall.remembers(ann)
    async with sessions() as session:
        assert await session.scalar(select(func.count(UserFact.id)).where(UserFact.user_id == ann)) == 0
    assert (await _ids(recall, bob, QUERY))[0] == bobs[2]
