"""A day's summary is a key of that day's messages: of two turns that match a question alike, the one
from the day whose summary matches the rest of it ranks first."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
QUESTION = "which garden did I mention while planning Kyoto?"


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_the_day_whose_summary_matches_ranks_its_turns_first(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    user = await add_user(sessions, "cli:ann")
    # The same words on both days; only the earlier day's summary tells what that day was about.
    days = {
        date(2026, 2, 10): "Ann is planning a trip to Kyoto in April and compared temples.",
        date(2026, 2, 12): "Ann had a stressful week at work.",
    }
    kyoto, work = [
        (await add_day(sessions, user, day, ["the garden was lovely", "glad you liked it"], summary=text))[1]
        for day, text in days.items()
    ]
    keyed = make_recall(recall_settings(search_summary_key_boost=0.3), sessions, vectors=vectors)
    unkeyed = make_recall(recall_settings(search_summary_key_boost=0.0), sessions, vectors=vectors)

    hits = await keyed.search(user, QUESTION, now=NOW)
    plain = await unkeyed.search(user, QUESTION, now=NOW)

    assert [h.kind for h in hits][:1] == ["summary"]  # the summary itself still comes first
    messages = [h.message_id for h in hits if h.message_id]
    assert messages[0] == kyoto[0]
    # Without the key, the tie goes to the newer day, as it always did.
    assert next(h.message_id for h in plain if h.message_id) == work[0]
