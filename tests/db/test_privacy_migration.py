"""Migration 0008_privacy on a database full of data: nothing lost, user ids never reused after it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine, session_factory
from db.migrate import alembic_config
from db.models import Base
from db.repositories.users import UserRepository

REVISION = "0008_privacy"
AT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def _upgrade(url: str, *targets: str) -> None:
    config = alembic_config(url)
    for target in targets:
        command.upgrade(config, target)


def _heads_before(url: str) -> list[str]:
    """The revisions beside this one that the one-head merge joins: the schema just before it."""
    merge = ScriptDirectory.from_config(alembic_config(url)).get_revision("0014_one_head")
    assert merge is not None
    return [h for h in merge._versioned_down_revisions if h != REVISION]


async def _fill(engine: AsyncEngine) -> list[int]:
    """Three users (the newest then forgotten, as before this migration) with rows in child tables."""
    at = AT.replace(tzinfo=None)
    ids: list[int] = []
    async with engine.begin() as conn:
        for n in (1, 2, 3):
            user_id = (
                await conn.execute(
                    text(
                        "INSERT INTO users (key, timezone, onboarding_status, profile, created_at)"
                        " VALUES (:key, 'UTC', 'complete', '{}', :at) RETURNING id"
                    ),
                    {"key": f"cli:u{n}", "at": at},
                )
            ).scalar_one()
            conversation_id = (
                await conn.execute(
                    text(
                        "INSERT INTO conversations (user_id, status, started_at, last_message_at,"
                        " messages, message_count, attempts)"
                        " VALUES (:user, 'active', :at, :at, '[]', 1, 0) RETURNING id"
                    ),
                    {"user": user_id, "at": at},
                )
            ).scalar_one()
            await conn.execute(
                text(
                    "INSERT INTO transcript_messages (user_id, conversation_id, role, kind, content, sent_at)"
                    " VALUES (:user, :conversation, 'user', 'text', :content, :at)"
                ),
                {"user": user_id, "conversation": conversation_id, "content": f"zebrafish {n}", "at": at},
            )
            ids.append(int(user_id))
        await conn.execute(text("DELETE FROM users WHERE id = :id"), {"id": ids[-1]})
    return ids


async def _counts(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        names = ("users", "conversations", "transcript_messages")
        return {n: int((await conn.execute(text(f"SELECT count(*) FROM {n}"))).scalar() or 0) for n in names}


async def test_upgrade_keeps_every_row_and_never_reuses_an_id(empty_url: str) -> None:
    await asyncio.to_thread(_upgrade, empty_url, *_heads_before(empty_url))
    engine = create_engine(empty_url)
    ids = await _fill(engine)
    before = await _counts(engine)
    assert before == {"users": 2, "conversations": 2, "transcript_messages": 2}
    await engine.dispose()

    await asyncio.to_thread(_upgrade, empty_url, "head")

    engine = create_engine(empty_url)
    try:
        assert await _counts(engine) == before  # the rebuild cascaded nothing
        sessions = session_factory(engine)
        async with sessions() as session:
            kept = list((await session.execute(text("SELECT id FROM users ORDER BY id"))).scalars())
            assert kept == ids[:2]
            # Full text still follows the rows (SQLite triggers, PostgreSQL generated column).
            if engine.dialect.name == "sqlite":
                found = await session.scalar(
                    text("SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH 'zebrafish'")
                )
                assert found == 2
        # The id forgotten before the upgrade, and every later one, is never handed out again.
        async with sessions() as session, session.begin():
            first = await UserRepository(session).create(key="cli:new", created_at=AT, timezone="UTC")
        assert first.id > ids[-1]
        async with sessions() as session, session.begin():
            await session.execute(text("DELETE FROM users WHERE id = :id"), {"id": first.id})
        async with sessions() as session, session.begin():
            second = await UserRepository(session).create(key="cli:newer", created_at=AT, timezone="UTC")
        assert second.id > first.id
        async with sessions() as session:
            tables = set(
                await session.run_sync(lambda s: s.connection().dialect.get_table_names(s.connection()))
            )
            assert {"pending_forgets", "rate_limit_events"} <= tables
            assert await session.scalar(select(func.count()).select_from(Base.metadata.tables["users"])) == 3
    finally:
        await engine.dispose()
