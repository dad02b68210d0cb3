"""The work queue's retry policy and its count of dead items, on both databases."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.inbox import InboxRepository, NewUpdate
from db.work import Retry, backoff, dead_items

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def test_backoff_doubles_and_is_capped() -> None:
    assert [backoff(n, 60, 300).total_seconds() for n in (1, 2, 3, 4)] == [60, 120, 240, 300]


def test_a_retry_policy_counts_its_attempts() -> None:
    retry = Retry(max_attempts=3, base_seconds=2, max_seconds=300)
    assert [retry.after(n).total_seconds() for n in (1, 2, 8, 9)] == [2, 4, 256, 300]
    # A failure of the third attempt is the last; a fourth claim is one too many.
    assert [retry.last(n) for n in (2, 3)] == [False, True]
    assert [retry.spent(n) for n in (3, 4)] == [False, True]


@pytest.mark.both_databases
async def test_dead_items_count_each_kind_and_show_the_newest_dead_updates(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    def dead(update_id: int, why: str) -> NewUpdate:
        return NewUpdate(update_id, 7, 7, {"update_id": update_id}, dead=why)

    async with sessions() as session:
        empty = await dead_items(session)
    assert empty.counts == {"updates": 0, "post-processing": 0, "touchpoints": 0, "tidying": 0, "graph": 0}
    assert empty.newest_updates == []

    async with sessions() as session, session.begin():
        await InboxRepository(session).add([dead(1, "chat id out of range"), dead(2, "bad text")], now=NOW)
        await InboxRepository(session).add([NewUpdate(3, 7, 7, {"update_id": 3})], now=NOW)
    async with sessions() as session:
        found = await dead_items(session, last=1)
    assert found.counts["updates"] == 2
    assert len(found.newest_updates) == 1 and found.newest_updates[0][1] in (
        "chat id out of range",
        "bad text",
    )
