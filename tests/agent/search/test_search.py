"""conversation_search: hybrid ranking, filters, summaries first, covered penalty, tie-breaks."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.errors import RecallInputError
from agent.search.query import make_snippet
from agent.search.search import without_speakers
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_finds_message_with_its_day(sessions: async_sessionmaker[AsyncSession], vectors: bool) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=vectors)
    user = await add_user(sessions, "cli:ann")
    segment, ids = await add_day(
        sessions,
        user,
        date(2026, 2, 10),
        ["I adopted a kitten called Pixel today", "Congratulations! What colour is Pixel?", "grey and tiny"],
    )
    await add_day(sessions, user, date(2026, 2, 20), ["work was busy", "sorry to hear that"])
    hits = await recall.search(user, "kitten Pixel", now=NOW)
    assert hits[0].kind == "message"
    assert hits[0].message_id == ids[0]
    assert hits[0].day_label == "2026-02-10"
    assert hits[0].day_segment_id == segment
    assert hits[0].covered_by_summary is False
    assert "kitten" in (hits[0].snippet or "")
    assert hits == sorted(hits, key=lambda h: -h.score)


async def test_summaries_first_and_covered_penalty(sessions: async_sessionmaker[AsyncSession]) -> None:
    # The penalty alone: the matching summary's key lifts its day again (test_summary_keys.py).
    settings = recall_settings(search_summary_key_boost=0.0)
    recall = make_recall(settings, sessions)
    user = await add_user(sessions, "cli:bob")
    summary = "## Summary\nBob planned a trip to Lisbon in May."
    segment, ids = await add_day(
        sessions, user, date(2026, 2, 1), ["trip to Lisbon in May", "Lisbon is lovely"], summary=summary
    )
    _, later = await add_day(sessions, user, date(2026, 2, 2), ["trip to Lisbon in May", "Lisbon is lovely"])
    hits = await recall.search(user, "Lisbon trip", now=NOW)
    assert hits[0].kind == "summary" and hits[0].day_segment_id == segment
    assert "Lisbon" in (hits[0].summary_snippet or "")
    messages = [h for h in hits if h.kind == "message"]
    covered = next(h for h in messages if h.message_id == ids[0])
    fresh = next(h for h in messages if h.message_id == later[0])
    assert covered.covered_by_summary is True and fresh.covered_by_summary is False
    # Same text: the covered copy scores exactly the penalty below the uncovered one.
    assert covered.score == pytest.approx(fresh.score * settings.search_covered_penalty, abs=2e-4)
    assert messages.index(fresh) < messages.index(covered)


async def test_ties_newer_day_then_newer_message(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Only the tie-break is under test: the reply after a match does not compete here.
    recall = make_recall(recall_settings(search_previous_turn_weight=0.0), sessions, vectors=False)
    user = await add_user(sessions, "cli:cy")
    _, old = await add_day(sessions, user, date(2026, 1, 5), ["the blue bicycle", "ok"])
    _, new = await add_day(sessions, user, date(2026, 1, 9), ["the blue bicycle", "ok", "the blue bicycle"])
    hits = await recall.search(user, "blue bicycle", now=NOW)
    assert [h.message_id for h in hits] == [new[2], new[0], old[0]]


async def test_filters_day_recency_limit_min_score(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:dee")
    for day in range(1, 26):
        await add_day(sessions, user, date(2026, 2, day), [f"garden note {day}: tomatoes", "nice"])
    by_day = await recall.search(user, "tomatoes", now=NOW, day=date(2026, 2, 7))
    assert by_day and {h.day_label for h in by_day} == {"2026-02-07"}
    assert await recall.search(user, "tomatoes", now=NOW, day=date(2025, 1, 1)) == []
    recent = await recall.search(user, "tomatoes", now=NOW, recency_days=10, limit=20)
    assert recent and all(h.day_label >= "2026-02-21" for h in recent)
    assert len(await recall.search(user, "tomatoes", now=NOW)) == 6
    assert len(await recall.search(user, "tomatoes", now=NOW, limit=500)) == 20
    assert await recall.search(user, "tomatoes", now=NOW, min_score=5.0) == []
    with pytest.raises(RecallInputError):
        await recall.search(user, "   ", now=NOW)
    with pytest.raises(RecallInputError):
        await recall.search(user, "x", now=NOW, limit=0)


async def test_vector_only_match_without_shared_words_in_message(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # The hashing embedder matches words; the neighbour in the same section is found through its chunk.
    recall = make_recall(recall_settings(search_section_tokens=200, search_chunk_tokens=200), sessions)
    user = await add_user(sessions, "cli:eve")
    _, ids = await add_day(sessions, user, date(2026, 2, 3), ["violin lessons start monday", "exciting"])
    hits = await recall.search(user, "violin lessons", now=NOW)
    found = {h.message_id for h in hits}
    assert ids[0] in found and ids[1] in found


def test_speaker_names_left_out_of_lexical_query() -> None:
    assert without_speakers("What did Zelda adopt?", ("Zelda", "Nikita")) == "What did adopt"
    assert without_speakers("Zelda and nikita", ("Zelda", "Nikita")) == "Zelda and nikita"  # nothing else
    assert without_speakers("kitten", ()) == "kitten"


async def test_greeting_with_name_does_not_outrank_answer(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=False)
    user, _ = await get_or_create_user(sessions, key="cli:zed", now=NOW, timezone="UTC", name="Zelda")
    _, ids = await add_day(
        sessions, user.id, date(2026, 2, 1), ["I adopted a kitten", "Hey Zelda, Zelda, how are you?"]
    )
    hits = await recall.search(user.id, "What did Zelda adopt?", now=NOW)
    assert hits[0].message_id == ids[0]
    assert all(h.score < hits[0].score for h in hits[1:])


async def test_a_short_statement_outranks_a_long_answer_holding_the_same_words(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=False)
    user = await add_user(sessions, "cli:dana")
    _, said = await add_day(sessions, user, date(2026, 2, 1), ["My first sprint ends on March 29."])
    plan = (
        "Here is a detailed plan for the whole project: set up the repository, write the models, "
        "add registration and login, then transactions and analytics; your first sprint ends on "
        "March 29, so keep the scope small, review each pull request, write tests for every route, "
        "measure the dashboard, document the deployment and leave a week for fixing what breaks."
    )
    # Newer, and holding every word of the question once: only its length tells them apart.
    _, answer = await add_day(sessions, user, date(2026, 2, 2), ["Can you plan my work?", plan])
    hits = await recall.search(user, "When does the first sprint end in March?", now=NOW)
    ranked = [h.message_id for h in hits]
    assert ranked.index(said[0]) < ranked.index(answer[1])


def test_the_snippet_of_a_long_answer_is_the_passage_that_matched() -> None:
    answer = (
        "Sprint planning helps. "
        + "Keep the scope small and review often. " * 20
        + "Your first sprint ends on March 29, with login done. "
        + "Then analytics. " * 20
    )
    snippet = make_snippet(answer, ["first", "sprint", "end", "march"], 120)
    assert "first sprint ends on March 29" in snippet and snippet.startswith("…")
    # One term: its first place, as before; none found: the start.
    assert make_snippet(answer, ["sprint"], 60).startswith("Sprint planning")
    assert make_snippet(answer, ["zebra"], 60).startswith("Sprint planning")
