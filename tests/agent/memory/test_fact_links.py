"""The person's facts linking turns across days: a search that finds a turn of one day also brings the
turn of another day whose fact shares the first fact's rare words (SEARCH_LINK_WEIGHT), from the
person's own held facts only."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.memory.corrections import end_facts
from agent.memory.units import FactUnits
from agent.search.recall import Recall
from db.models import UserFact
from db.repositories.facts import FactRepository
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)
DAY_ONE = ["I adopted a puppy from the shelter today", "Congratulations! What is its name?"]
# Day three's turn holds no word of the question; its fact shares the dog's name with day one's.
DAY_THREE = ["Took him for his shots this morning", "Good, how did it go?"]
FILLER = ["The weather was grey and wet", "Sounds like a day for staying in"]
FACT_ONE = "The user adopted a puppy named Biscuit from the shelter"
FACT_THREE = "Biscuit had his vaccinations at the vet"
OTHERS = ["The user works as a nurse in Porto", "The user prefers tea to coffee", "The user runs on Sundays"]
QUERY = "When did I adopt the puppy?"


async def _scores(recall: Recall, user_id: int) -> dict[int, float]:
    """Message id -> score of the hits, best first."""
    return {h.message_id: h.score for h in await recall.search(user_id, QUERY, now=NOW) if h.message_id}


async def _ids(recall: Recall, user_id: int) -> list[int]:
    return list(await _scores(recall, user_id))


async def _person(
    sessions: async_sessionmaker[AsyncSession], key: str, facts: list[tuple[str, int]]
) -> tuple[int, list[int], list[int]]:
    """A person with days 1, 2 and 3 and the facts given as (text, 0 for day one's turn, 3 for day
    three's); returns (user, day one's ids, day three's ids)."""
    user = await add_user(sessions, key)
    _, one = await add_day(sessions, user, date(2026, 3, 1), DAY_ONE)
    await add_day(sessions, user, date(2026, 3, 2), FILLER)
    _, three = await add_day(sessions, user, date(2026, 3, 3), DAY_THREE)
    async with sessions() as session, session.begin():
        sourced = [(text, [one[0] if day == 1 else three[0]]) for text, day in facts]
        await FactRepository(session).add_sourced(user, None, sourced, NOW, source="extraction")
        await FactRepository(session).add_sourced(
            user, None, [(t, []) for t in OTHERS], NOW, source="extraction"
        )
    return user, one, three


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_a_fact_link_pulls_the_turn_of_another_day(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    ann, one, three = await _person(sessions, "cli:ann", [(FACT_ONE, 1), (FACT_THREE, 3)])
    off = make_recall(recall_settings(search_link_weight=0.0), sessions, vectors=vectors)
    on = make_recall(recall_settings(search_link_weight=0.5), sessions, vectors=vectors)

    without = await _scores(off, ann)
    linked = await _scores(on, ann)

    # Day one's turn leads either way; the link brings day three's turn in (full text alone never
    # finds it) and scores it higher than without the link.
    assert next(iter(without)) == next(iter(linked)) == one[0]
    assert three[0] in linked
    if vectors:  # every turn is a candidate by its cosine: the link adds to day three's score
        assert linked[three[0]] > without[three[0]]
    else:
        assert three[0] not in without
        # With SEARCH_FACT_WEIGHT 0 the facts take no part, their links neither.
        gated = make_recall(
            recall_settings(search_link_weight=0.5, search_fact_weight=0.0), sessions, vectors=False
        )
        assert three[0] not in await _ids(gated, ann)

    # A fact taken back links nothing any more.
    assert isinstance(on.units, FactUnits)
    async with sessions() as session, session.begin():
        fact_id = await session.scalar(
            select(UserFact.id).where(UserFact.user_id == ann, UserFact.content == FACT_THREE)
        )
        assert fact_id is not None
        await end_facts(session, on.units, ann, [fact_id], reason="it was wrong", at=NOW)
    if not vectors:
        assert three[0] not in await _ids(on, ann)


async def test_another_persons_facts_never_link(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Ann holds only day one's fact; Bob holds both, and his day-three fact shares Ann's words.
    ann, ann_one, ann_three = await _person(sessions, "cli:ann", [(FACT_ONE, 1)])
    bob, bob_one, bob_three = await _person(sessions, "cli:bob", [(FACT_ONE, 1), (FACT_THREE, 3)])
    recall = make_recall(recall_settings(search_link_weight=0.5), sessions, vectors=False)

    anns = await _ids(recall, ann)
    assert anns[0] == ann_one[0]
    assert ann_three[0] not in anns
    assert not set(anns) & {*bob_one, *bob_three}
    # Bob's own link works, with his own turns only.
    bobs = await _ids(recall, bob)
    assert bob_three[0] in bobs and not set(bobs) & {*ann_one, *ann_three}
