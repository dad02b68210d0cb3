"""Indexing: incremental equals a rebuild, summaries follow their day, forgetting leaves nothing behind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import pytest
from sqlalchemy import delete, func, select, text, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.account.users import get_or_create_user
from agent.search.embeddings import InputType, Vectors
from agent.search.recall import Recall
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import DaySegment, SearchChunk, User
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings, set_summary

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, tzinfo=UTC)


async def _chunks(sessions: async_sessionmaker[AsyncSession], user: int) -> list[tuple[str, list[int]]]:
    async with sessions() as session:
        rows = await session.execute(
            select(SearchChunk.kind, SearchChunk.message_ids)
            .where(SearchChunk.user_id == user)
            .order_by(SearchChunk.kind, SearchChunk.first_message_id)
        )
        return [(k, list(ids)) for k, ids in rows]


async def test_incremental_equals_rebuild(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:inc")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    for day in (1, 2):
        for turn in range(6):
            await add_day(sessions, user, date(2026, 2, day), [" ".join(words[: turn + 3]), "ok then"])
            await recall.index_quietly(user, now=NOW)
    incremental = await _chunks(sessions, user)
    await recall.reindex(now=NOW, user_ids=[user])
    assert await _chunks(sessions, user) == incremental
    assert all(kind == "messages" for kind, _ in incremental) and len(incremental) > 2


async def test_a_catch_up_in_slices_equals_a_rebuild(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:slices")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    for day in (1, 2):
        await add_day(sessions, user, date(2026, 2, day), [" ".join(words[: n % 8 + 3]) for n in range(12)])
    passes = 1
    while (await recall.index_user(user, now=NOW, limit=5)).more:
        passes += 1
    sliced = await _chunks(sessions, user)
    await recall.reindex(now=NOW, user_ids=[user])
    assert await _chunks(sessions, user) == sliced
    assert passes == 5  # 24 messages, 5 new ones a pass: a day's unfinished chunk is read again on top


async def test_a_pass_writes_nothing_while_it_embeds(sessions: async_sessionmaker[AsyncSession]) -> None:
    # SQLite has one write lock for the whole database, held from a transaction's first write to its
    # commit: a pass that wrote before embedding kept every turn's writes waiting for the model.
    user = await add_user(sessions, "cli:lock")
    await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper", "a foghorn"])
    await make_recall(recall_settings(), sessions).index_user(user, now=NOW)  # an unfinished chunk
    await add_day(sessions, user, date(2026, 2, 1), ["the keeper's cat", "a lantern"])
    await add_day(sessions, user, date(2026, 2, 2), ["fresh paint on the tower", "white and red"])
    writes: list[str] = []

    class WritingWhileEmbedding(HashingEmbedder):
        async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
            try:
                async with asyncio.timeout(2), sessions() as session, session.begin():
                    # The chunk the pass rebuilds, and a row of another table.
                    await session.execute(
                        update(SearchChunk).where(SearchChunk.user_id == user).values(created_at=NOW)
                    )
                    await session.execute(update(User).where(User.id == user).values(last_message_at=NOW))
                writes.append("done")
            except TimeoutError:
                writes.append("waited for the pass")
            return await super().embed(texts, input_type=input_type)

    engine = sessions.kw["bind"]
    recall = Recall(
        settings=recall_settings(),
        sessions=sessions,
        dialect=engine.dialect.name,
        embedder=WritingWhileEmbedding(),
    )
    stats = await recall.index_user(user, now=NOW)
    assert stats.chunks >= 2 and stats.summaries == 0
    assert writes and set(writes) == {"done"}


async def test_the_warm_up_catches_up_a_step_at_a_time(sessions: async_sessionmaker[AsyncSession]) -> None:
    user = await add_user(sessions, "cli:behind")
    for day in (1, 2, 3):
        await add_day(sessions, user, date(2026, 2, day), [f"the lighthouse keeper {n}" for n in range(16)])
    async with sessions() as session, session.begin():
        await session.execute(update(User).where(User.id == user).values(last_message_at=NOW))
    steps: list[int] = []

    async def pause() -> None:
        steps.append(len(await _chunks(sessions, user)))

    recall = make_recall(recall_settings(), sessions)
    await recall.warm_up(now=NOW, pause=pause)
    assert recall.cache is not None and user in recall.cache
    # 48 messages behind: two slices of the catch-up, then the vectors, each after a pause.
    assert len(steps) == 3 and steps[0] == 0 < steps[1] < steps[2]
    warmed = await _chunks(sessions, user)
    await recall.reindex(now=NOW, user_ids=[user])
    assert await _chunks(sessions, user) == warmed


async def test_summary_indexed_and_replaced(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:sum")
    segment_id, ids = await add_day(sessions, user, date(2026, 2, 1), ["we talked about marmalade", "yum"])
    async with sessions() as session, session.begin():
        segment = await session.get(DaySegment, segment_id)
        assert segment is not None
        await set_summary(session, segment, "## Summary\nMarmalade recipes.", ids[-1])
    hits = await recall.search(user, "marmalade", now=NOW)
    assert hits[0].kind == "summary"
    async with sessions() as session, session.begin():
        segment = await session.get(DaySegment, segment_id)
        assert segment is not None
        await set_summary(session, segment, "## Summary\nQuince jam instead.", ids[-1], at=NOW)
    hits = await recall.search(user, "quince jam", now=NOW)
    assert hits[0].kind == "summary" and "Quince" in (hits[0].summary_snippet or "")
    assert not [h for h in await recall.search(user, "marmalade", now=NOW) if h.kind == "summary"]
    assert [k for k, _ in await _chunks(sessions, user)].count("summary") == 1


async def test_forget_removes_every_index_row(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    gone = await add_user(sessions, "cli:gone")
    kept = await add_user(sessions, "cli:kept")
    await add_day(
        sessions, gone, date(2026, 2, 1), ["zebra crossing", "stripes"], summary="## Summary\nzebra"
    )
    await add_day(sessions, kept, date(2026, 2, 1), ["zebra crossing", "stripes"])
    assert await recall.search(gone, "zebra", now=NOW)
    await forget_user(sessions, gone, [recall])
    async with sessions() as session:
        assert await session.scalar(select(func.count()).where(SearchChunk.user_id == gone)) == 0
        dialect = session.get_bind().dialect.name
        if dialect == "sqlite":
            # External-content FTS5 rows went with the cascade (triggers), not just out of sight.
            fts = await session.scalar(
                text("SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH 'zebra'")
            )
            assert fts == 1
            summaries = await session.scalar(
                text("SELECT count(*) FROM day_summary_fts WHERE day_summary_fts MATCH 'zebra'")
            )
            assert summaries == 0
    assert [h.message_id for h in await recall.search(kept, "zebra", now=NOW)]
    assert (await recall.export_user(kept))["embedded_chunks"] >= 1
    async with sessions() as session, session.begin():
        await session.execute(delete(User).where(User.id == kept))


async def test_full_text_only_when_embeddings_off(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=False)
    user = await add_user(sessions, "cli:fts")
    _, ids = await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper", "wow"])
    hits = await recall.search(user, "lighthouse", now=NOW)
    assert [h.message_id for h in hits] == [ids[0], ids[1]]  # the match, then the reply to it
    assert await _chunks(sessions, user) == []
    await recall.reindex(now=NOW)  # rebuilds the full text; still finds it
    again = await recall.search(user, "lighthouse", now=NOW)
    assert again[0].message_id == ids[0]


async def _layout(
    sessions: async_sessionmaker[AsyncSession], user: int
) -> list[tuple[list[int], Any, bytes]]:
    async with sessions() as session:
        rows = await session.execute(
            select(SearchChunk.message_ids, SearchChunk.sections, SearchChunk.vectors)
            .where(SearchChunk.user_id == user)
            .order_by(SearchChunk.first_message_id)
        )
        return [(list(ids), sections, bytes(blob)) for ids, sections, blob in rows]


async def test_growing_day_vectors_equal_rebuild(sessions: async_sessionmaker[AsyncSession]) -> None:
    # A growing chunk reuses its sections' vectors: the stored rows must equal a rebuild, bit for bit.
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:grow")
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    for turn in range(8):
        await add_day(sessions, user, date(2026, 2, 1), [" ".join(words[: turn + 2]), "fine"])
        await recall.index_quietly(user, now=NOW)
    incremental = await _layout(sessions, user)
    await recall.reindex(now=NOW, user_ids=[user])
    assert await _layout(sessions, user) == incremental and len(incremental) > 1


async def test_speaker_names_are_embedded(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Questions name people ("what did Zelda adopt?") while turns say "I": the names are embedded.
    settings = recall_settings(persona_name="Quentin", search_lexical_weight=0.0, search_section_tokens=3)
    recall = make_recall(settings, sessions)
    user, _ = await get_or_create_user(sessions, key="cli:zelda", now=NOW, timezone="UTC", name="Zelda")
    _, ids = await add_day(sessions, user.id, date(2026, 2, 1), ["I adopted a kitten", "I adopted a kitten"])
    zelda = await recall.search(user.id, "Zelda kitten", now=NOW)
    quentin = await recall.search(user.id, "Quentin kitten", now=NOW)
    assert zelda[0].message_id == ids[0] and zelda[0].role == "user"
    assert quentin[0].message_id == ids[1] and quentin[0].role == "assistant"


async def test_warm_up_loads_recent_users_vectors(
    sessions: async_sessionmaker[AsyncSession], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="agent.search.recall_index")
    await make_recall(recall_settings(), sessions).warm_up(now=NOW)
    assert "search vectors warmed" not in caplog.text  # an empty database: nothing to say
    indexer = make_recall(recall_settings(), sessions)
    active, idle = await add_user(sessions, "cli:active"), await add_user(sessions, "cli:idle")
    for user in (active, idle):
        await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper", "wow"])
        await indexer.index_user(user, now=NOW)
    async with sessions() as session, session.begin():
        await session.execute(update(User).where(User.id == active).values(last_message_at=NOW))
    started = make_recall(recall_settings(), sessions)
    await started.warm_up(now=NOW)
    assert started.cache is not None
    assert active in started.cache and idle not in started.cache
    [warmed] = [r for r in caplog.records if r.getMessage() == "search vectors warmed"]
    assert warmed.__dict__["users"] == 1  # the users it loaded, not the cap
    none = make_recall(recall_settings(search_warm_users=0), sessions)
    await none.warm_up(now=NOW)
    assert none.cache is not None and active not in none.cache
