"""The inbox table's statements on both databases: dedupe, order per conversation, leases, pruning."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from db.inbox import InboxRepository, NewUpdate
from db.models import InboxUpdate, TranscriptMessage, User

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
LEASE = timedelta(seconds=20)


def update(update_id: int, sender: int | None, text: str = "hi") -> NewUpdate:
    message = {"message_id": update_id, "date": 0, "chat": {"id": sender or -100}, "text": text}
    return NewUpdate(update_id, sender, sender or -100, {"update_id": update_id, "message": message})


async def add(sessions: async_sessionmaker[AsyncSession], *updates: NewUpdate) -> int:
    async with sessions() as session, session.begin():
        return await InboxRepository(session).add(updates, now=NOW)


async def claim(
    sessions: async_sessionmaker[AsyncSession], holder: str = "a", *, at: datetime = NOW, limit: int = 10
) -> list[int]:
    async with sessions() as session, session.begin():
        rows = await InboxRepository(session).claim(holder=holder, now=at, lease=LEASE, limit=limit)
    return [row.update_id for row in rows]


async def finish(sessions: async_sessionmaker[AsyncSession], update_id: int) -> None:
    async with sessions() as session, session.begin():
        row_id = await session.scalar(select(InboxUpdate.id).where(InboxUpdate.update_id == update_id))
        assert row_id is not None
        assert await InboxRepository(session).finish(row_id, now=NOW, outcome="answered")


async def test_a_repeated_update_id_is_stored_once(sessions: async_sessionmaker[AsyncSession]) -> None:
    assert await add(sessions, update(1, 7), update(2, 7)) == 2
    assert await add(sessions, update(2, 7), update(3, 7)) == 1
    async with sessions() as session:
        ids = (await session.execute(select(InboxUpdate.update_id).order_by(InboxUpdate.id))).scalars()
        assert list(ids) == [1, 2, 3]


async def test_a_lone_update_is_stored_and_leased_in_one_statement_when_it_heads_its_queue(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async def add_leased(u: NewUpdate, holder: str = "a") -> tuple[bool, int | None]:
        async with sessions() as session, session.begin():
            new, row = await InboxRepository(session).add_leased(u, holder=holder, now=NOW, lease=LEASE)
        return new, row.update_id if row is not None else None

    assert await add_leased(update(1, 7, "nul\x00inside")) == (True, 1)
    assert await add_leased(update(2, 7)) == (True, None)  # its chat has a row in flight: it waits
    assert await add_leased(update(1, 7)) == (False, None)  # a repeat changes nothing
    assert await add_leased(update(3, 8), holder="b") == (True, 3)
    async with sessions() as session:
        rows = (await session.execute(select(InboxUpdate).order_by(InboxUpdate.update_id))).scalars().all()
    leases = [(r.update_id, r.status, r.lease_holder, r.attempts, r.lease_expires_at) for r in rows]
    assert leases == [
        (1, "pending", "a", 1, NOW + LEASE),
        (2, "pending", None, 0, None),
        (3, "pending", "b", 1, NOW + LEASE),
    ]
    assert rows[0].payload is not None and rows[0].payload["message"]["text"] == "nulinside"
    # The waiting row is the claim's once the first is done; the leased ones are nobody else's.
    assert await claim(sessions, "c") == []
    await finish(sessions, 1)
    assert await claim(sessions, "c") == [2]


async def test_updates_without_a_sender_are_stored_done_without_their_json(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, None))
    async with sessions() as session:
        row = await session.scalar(select(InboxUpdate))
    assert row is not None and (row.status, row.outcome, row.payload) == ("done", "ignored", None)
    assert await claim(sessions) == []


async def test_one_row_per_conversation_oldest_first_and_the_next_only_after_it_is_done(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, 7), update(2, 8), update(3, 7), update(4, 9), update(5, 8))
    assert await claim(sessions) == [1, 2, 4]
    assert await claim(sessions, "b") == []  # every sender's head is leased; later rows wait
    await finish(sessions, 1)
    assert await claim(sessions, "b") == [3]
    await finish(sessions, 2)
    await finish(sessions, 3)
    assert await claim(sessions) == [5]


async def test_a_row_stored_late_waits_while_its_conversation_has_a_row_in_flight(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(10, 7))
    assert await claim(sessions) == [10]
    await add(sessions, update(9, 7))  # an earlier update committed after a later one
    assert await claim(sessions, "b") == []
    await finish(sessions, 10)
    assert await claim(sessions, "b") == [9]


def in_chat(update_id: int, sender: int, chat: int) -> NewUpdate:
    message = {"message_id": update_id, "date": 0, "chat": {"id": chat}, "from": {"id": sender}}
    return NewUpdate(update_id, sender, chat, {"update_id": update_id, "message": {**message, "text": "hi"}})


async def test_two_chats_of_one_user_are_worked_side_by_side_and_each_chat_in_order(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    group = -1001
    # One user writes in their private chat (whose id is theirs) and in a group, alternately.
    await add(sessions, in_chat(1, 7, 7), in_chat(2, 7, group), in_chat(3, 7, 7), in_chat(4, 7, group))
    assert await claim(sessions) == [1, 2]  # both chats' heads at once, though they share a sender
    assert await claim(sessions, "b") == []  # each chat has its row in flight
    await finish(sessions, 2)
    assert await claim(sessions, "b") == [4]
    await finish(sessions, 1)
    assert await claim(sessions) == [3]
    async with sessions() as session, session.begin():
        # A lone update stored while the private chat's row is in flight: the group's queue is free.
        repo = InboxRepository(session)
        await repo.finish(await _row_id(session, 4), now=NOW, outcome="answered")
        _, leased = await repo.add_leased(in_chat(5, 7, group), holder="c", now=NOW, lease=LEASE)
        _, waiting = await repo.add_leased(in_chat(6, 7, 7), holder="c", now=NOW, lease=LEASE)
    assert leased is not None and leased.update_id == 5
    assert waiting is None
    async with sessions() as session:
        keys = dict((await session.execute(select(InboxUpdate.update_id, InboxUpdate.queue_key))).all())
    assert keys == {1: 7, 2: group, 3: 7, 4: group, 5: group, 6: 7}


async def test_an_update_without_a_chat_queues_with_its_sender(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    inline = NewUpdate(1, 7, None, {"update_id": 1, "callback_query": {"id": "q", "from": {"id": 7}}})
    await add(sessions, inline, in_chat(2, 7, 7))
    assert await claim(sessions) == [1]  # the private chat's message waits behind it
    await finish(sessions, 1)
    assert await claim(sessions) == [2]


async def _row_id(session: AsyncSession, update_id: int) -> int:
    row_id = await session.scalar(select(InboxUpdate.id).where(InboxUpdate.update_id == update_id))
    assert row_id is not None
    return row_id


async def test_an_expired_lease_is_taken_over_and_counted_when_a_reply_was_recorded(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, 7))
    async with sessions() as session, session.begin():
        (row,) = await InboxRepository(session).claim(holder="dead", now=NOW, lease=LEASE, limit=5)
        # The first of two chunks with Telegram: the answer recorded with its count.
        assert await InboxRepository(session).record_sent(
            row.id, holder="dead", reply="hello", sent=1, total=2, repeated=False, now=NOW
        )
    assert await claim(sessions, "live", at=NOW + LEASE / 2) == []
    async with sessions() as session, session.begin():
        (taken,) = await InboxRepository(session).claim(
            holder="live", now=NOW + LEASE * 2, lease=LEASE, limit=5
        )
        # The dead worker's lease is gone: it can no longer record anything on the row, only count
        # the chunk Telegram took from it as a possible second answer.
        assert not await InboxRepository(session).record_sent(
            row.id, holder="dead", reply="again", sent=1, total=1, repeated=False, now=NOW
        )
        await InboxRepository(session).sent_unheld(row.id)
    assert (taken.status, taken.reply_text, taken.reply_chunks_sent, taken.attempts) == (
        "replying",
        "hello",
        1,
        2,
    )
    async with sessions() as session:
        stored = await session.get(InboxUpdate, row.id)
    assert stored is not None and stored.resumed_sends == 2


async def test_a_repeated_answer_is_recorded_as_a_resumed_send(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, 7), update(2, 8))
    async with sessions() as session, session.begin():
        repo = InboxRepository(session)
        first, second = await repo.claim(holder="a", now=NOW, lease=LEASE, limit=5)
        # A one-chunk answer given by its turn for the first time, and one its turn found stored
        # before (an earlier try may have sent it): both rows done with one statement each.
        assert await repo.record_sent(
            first.id, holder="a", reply="hi", sent=1, total=1, repeated=False, now=NOW
        )
        assert await repo.record_sent(
            second.id, holder="a", reply="hi", sent=1, total=1, repeated=True, now=NOW
        )
    async with sessions() as session:
        rows = [await session.get(InboxUpdate, row.id) for row in (first, second)]
    assert [(r.status, r.outcome, r.reply_chunks_sent, r.resumed_sends, r.payload) for r in rows if r] == [
        ("done", "answered", 1, 0, None),
        ("done", "answered", 1, 1, None),
    ]


async def test_renew_keeps_the_rows_and_release_gives_them_back_for_later(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, 7), update(2, 8))
    assert await claim(sessions) == [1, 2]
    async with sessions() as session, session.begin():
        repo = InboxRepository(session)
        ids = list((await session.execute(select(InboxUpdate.id).order_by(InboxUpdate.id))).scalars())
        held = await repo.renew(ids, holder="a", now=NOW + LEASE, lease=LEASE)
        assert held == set(ids)
        assert await repo.renew(ids, holder="b", now=NOW + LEASE, lease=LEASE) == set()
        first = min(held)
        await repo.release(first, holder="a", available_at=NOW + LEASE * 3, error="database restarting")
    assert await claim(sessions, "b", at=NOW + LEASE * 3 / 2) == []  # row 2 still leased, row 1 backs off
    # Later the backoff is over, and row 2's renewed lease has run out (its worker stopped renewing).
    assert await claim(sessions, "b", at=NOW + LEASE * 3) == [1, 2]


async def test_finish_drops_the_text_and_links_the_user_so_forgetting_the_user_takes_the_row(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    async with sessions() as session, session.begin():
        user = User(key="telegram:7", telegram_id=7, timezone="UTC", profile={}, created_at=NOW)
        session.add(user)
    await add(sessions, update(1, 7, "a secret"))
    await claim(sessions)
    await finish(sessions, 1)
    async with sessions() as session:
        row = await session.scalar(select(InboxUpdate))
    assert row is not None and (row.status, row.payload, row.reply_text, row.user_id) == (
        "done",
        None,
        None,
        user.id,
    )
    async with sessions() as session, session.begin():
        await session.delete(await session.get(User, user.id))
    async with sessions() as session:
        assert await session.scalar(select(InboxUpdate)) is None


async def test_prune_and_forget_delete_only_finished_rows(sessions: async_sessionmaker[AsyncSession]) -> None:
    await add(sessions, update(1, 7), update(2, 7), update(3, 8))
    await claim(sessions)
    await finish(sessions, 1)
    await finish(sessions, 3)
    async with sessions() as session, session.begin():
        repo = InboxRepository(session)
        assert await repo.prune(done_before=NOW) == 0
        assert await repo.forget_sender(7) == 1
        assert await repo.prune(done_before=NOW + timedelta(seconds=1)) == 1
        assert await repo.counts() == {"pending": 1}


async def test_two_workers_claiming_at_once_never_take_the_same_row(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    await add(sessions, *(update(i, 100 + i % 40) for i in range(1, 201)))
    taken: list[int] = []

    async def worker(holder: str) -> None:
        while True:
            ids = await claim(sessions, holder, limit=3)
            if not ids:
                return
            taken.extend(ids)
            for update_id in ids:
                await finish(sessions, update_id)

    await asyncio.gather(*(worker(f"w{n}") for n in range(4)))
    assert sorted(taken) == list(range(1, 201))


async def test_nul_characters_are_removed_from_text_and_json(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    await add(sessions, update(1, 7, "nul\x00in\x00text"))
    async with sessions() as session, session.begin():
        user = User(key="nul\x00key", timezone="UTC", profile={"k\x00": ["v\x00"]}, created_at=NOW)
        session.add(user)
        await session.flush()
        session.add(
            TranscriptMessage(user_id=user.id, role="user", content="a\x00b", sent_at=NOW, kind="text")
        )
    async with sessions() as session:
        payload = await session.scalar(select(InboxUpdate.payload))
        stored = await session.scalar(select(User).where(User.key == "nulkey"))
        content = await session.scalar(select(TranscriptMessage.content))
    assert payload is not None and payload["message"]["text"] == "nulintext"
    assert stored is not None and stored.profile == {"k": ["v"]}
    assert content == "ab"
