"""Facts as retrieval units: a fact's words find the turns it comes from, for its own user only."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.search.language import set_language
from agent.search.recall import Recall
from db.models import SearchChunk
from db.repositories.facts import FactRepository
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
# The turns never say "flat" or "Porto": only the fact learnt from them does.
TURNS = [
    "I finally got the keys today!",
    "Congratulations! How does it feel?",
    "Huge, and the view is lovely",
]


async def _add_facts(
    sessions: async_sessionmaker[AsyncSession], user_id: int, facts: Sequence[tuple[str, list[int]]]
) -> None:
    async with sessions() as session, session.begin():
        await FactRepository(session).add_sourced(user_id, None, facts, NOW, source="extraction")


async def _ids(recall: Recall, user_id: int, query: str) -> list[int]:
    return [h.message_id for h in await recall.search(user_id, query, now=NOW) if h.message_id]


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_a_fact_hit_returns_its_source_turns(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    user = await add_user(sessions, "cli:ann")
    _, ids = await add_day(sessions, user, date(2026, 2, 10), TURNS)
    await add_day(sessions, user, date(2026, 2, 12), ["work was busy", "sorry to hear that"])
    await _add_facts(sessions, user, [("Ann bought a flat in Porto", [ids[0], ids[2]])])
    recall = make_recall(recall_settings(), sessions, vectors=vectors)
    without = make_recall(recall_settings(search_fact_weight=0.0), sessions, vectors=vectors)

    found = await _ids(recall, user, "Where did Ann buy a flat?")
    unaided = await _ids(without, user, "Where did Ann buy a flat?")

    assert set(found[:2]) == {ids[0], ids[2]}
    if not vectors:  # no word of the question is in the turns: full text alone cannot find them
        assert unaided == []


async def test_facts_are_indexed_once_and_follow_their_changes(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    user = await add_user(sessions, "cli:ann")
    _, ids = await add_day(sessions, user, date(2026, 2, 10), TURNS)
    await _add_facts(sessions, user, [("Ann bought a flat in Porto", [ids[0]]), ("Ann likes tea", [])])
    recall = make_recall(recall_settings(), sessions)

    first = await recall.index_user(user, now=NOW)
    again = await recall.index_user(user, now=NOW)
    await _add_facts(sessions, user, [("Ann bought a flat in Porto", [ids[2]])])  # said again later
    changed = await recall.index_user(user, now=NOW)

    # Every held fact is a unit; one saved by a tool names no message, so it reaches none.
    assert (first.facts, again.facts, changed.facts) == (2, 0, 1)
    async with sessions() as session:
        units = (
            (
                await session.execute(
                    select(SearchChunk).where(SearchChunk.kind == "fact").order_by(SearchChunk.id)
                )
            )
            .scalars()
            .all()
        )
    assert sorted(u.message_ids for u in units) == [[], [ids[0], ids[2]]]


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_one_users_facts_never_reach_another_users_search(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    ann, bob = await add_user(sessions, "cli:ann"), await add_user(sessions, "cli:bob")
    _, anns = await add_day(sessions, ann, date(2026, 2, 10), TURNS)
    _, bobs = await add_day(sessions, bob, date(2026, 2, 10), ["we talked about nothing much", "ok"])
    # A fact of Bob's that (wrongly) names Ann's message, and a fact of Ann's.
    await _add_facts(sessions, bob, [("Bob hides a secret flat in Porto", [anns[0], bobs[0]])])
    await _add_facts(sessions, ann, [("Ann keeps a diary of dreams", [anns[1]])])
    recall = make_recall(recall_settings(), sessions, vectors=vectors)

    bob_found = await _ids(recall, bob, "secret flat in Porto")
    ann_found = await _ids(recall, ann, "secret flat in Porto")

    assert set(bob_found) <= set(bobs) and bobs[0] in bob_found
    assert not set(bob_found) & set(anns)
    if not vectors:  # Bob's fact lends Ann's turns nothing: none of them holds those words
        assert ann_found == []
    assert not set(await _ids(recall, bob, "diary of dreams")) & set(anns)


async def test_the_words_of_facts_follow_new_facts_and_new_sources(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    user = await add_user(sessions, "cli:ann")
    _, ids = await add_day(sessions, user, date(2026, 2, 10), TURNS)
    recall = make_recall(recall_settings(), sessions, vectors=False)
    assert await _ids(recall, user, "flat in Porto") == []

    await _add_facts(sessions, user, [("Ann bought a flat in Porto", [ids[0]])])
    assert await _ids(recall, user, "flat in Porto") == [ids[0]]
    await _add_facts(sessions, user, [("Ann bought a flat in Porto", [ids[2]])])  # the same fact, said again
    assert sorted(await _ids(recall, user, "flat in Porto")) == [ids[0], ids[2]]

    await recall.forget_user(user)
    assert not recall.remembers(user)


@pytest.mark.parametrize(
    ("language", "turns", "fact", "question"),
    [
        # Another form of the word, and no accents typed: the fact's words are stemmed and folded.
        ("fr", ["J'ai enfin les clés !", "Bravo !"], "Léa a déménagé à Lyon", "demenager"),
        # No spaces between words: the fact's characters are matched in neighbouring pairs.
        ("zh", ["我终于拿到钥匙了！", "恭喜！"], "小林在杭州买了一套公寓", "杭州的公寓"),
    ],
    ids=["fr", "zh"],
)
async def test_fact_words_are_read_in_the_users_language(
    sessions: async_sessionmaker[AsyncSession], language: str, turns: list[str], fact: str, question: str
) -> None:
    user = await add_user(sessions, "cli:lea")
    async with sessions() as session, session.begin():
        await set_language(session, user, language)
    _, ids = await add_day(sessions, user, date(2026, 2, 10), turns)
    await _add_facts(sessions, user, [(fact, [ids[0]])])
    recall = make_recall(recall_settings(), sessions, vectors=False)

    assert await _ids(recall, user, question) == [ids[0]]
