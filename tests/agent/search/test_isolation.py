"""Isolation by construction: whatever the query or ids, no result belongs to another user."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.errors import RecallInputError, RecallNotFoundError
from agent.search.get import MessagesOut, SummaryOut
from db.models import DaySegment, TranscriptMessage
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

WORDS = ["apple", "river", "piano", "secret", "lisbon", "kitten", "doctor", "money", "tea", "42"]
NOW = datetime(2026, 3, 3, tzinfo=UTC)

corpora = st.lists(
    st.tuples(
        st.integers(0, 2),  # which user
        st.integers(1, 20),  # day of February
        st.lists(
            st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join), min_size=1, max_size=5
        ),
        st.booleans(),  # with a summary
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    corpus=corpora,
    query=st.lists(
        st.sampled_from([*WORDS, "the", "ünïcode", '"', "*", "OR", "(", "-"]), min_size=1, max_size=4
    ),
    probe=st.lists(st.integers(-5, 400), min_size=3, max_size=3),
)
async def test_no_result_of_another_user(
    sessions: async_sessionmaker[AsyncSession],
    corpus: list[tuple[int, int, list[str], bool]],
    query: list[str],
    probe: list[int],
) -> None:
    recall = make_recall(recall_settings(), sessions)
    token = f"{len(corpus)}-{abs(hash((tuple(query), tuple(probe)))) % 10**9}"
    users = [await add_user(sessions, f"cli:{token}-{i}") for i in range(3)]
    used: set[tuple[int, int]] = set()
    for who, day, texts, summarised in corpus:
        if (who, day) in used:
            continue
        used.add((who, day))
        summary = "## Summary\n" + " ".join(texts) if summarised else None
        await add_day(sessions, users[who], date(2026, 2, day), texts, summary=summary)
    async with sessions() as session:
        owner_of_message = dict(
            (await session.execute(select(TranscriptMessage.id, TranscriptMessage.user_id))).all()
        )
        owner_of_segment = dict((await session.execute(select(DaySegment.id, DaySegment.user_id))).all())
    text = " ".join(query)
    for user in users:
        for hit in await recall.search(user, text, now=NOW, limit=20):
            assert owner_of_segment.get(hit.day_segment_id or -1, user) == user
            if hit.message_id is not None:
                assert owner_of_message[hit.message_id] == user
        ids = [*probe, *owner_of_message, *owner_of_segment]
        for value in ids:
            for kwargs in ({"message_id": value}, {"day_segment_id": value}):
                try:
                    out = await recall.get(user, **kwargs)
                except (RecallNotFoundError, RecallInputError):
                    continue
                if isinstance(out, SummaryOut):
                    assert owner_of_segment[out.day_segment_id] == user
                else:
                    assert all(owner_of_message[m.message_id] == user for m in out.messages)
        try:
            ranged = await recall.get(
                user, day_segment_id=probe[0], from_message_id=min(probe), to_message_id=10**6
            )
        except (RecallNotFoundError, RecallInputError):
            continue
        assert isinstance(ranged, MessagesOut)
        assert all(owner_of_message[m.message_id] == user for m in ranged.messages)
