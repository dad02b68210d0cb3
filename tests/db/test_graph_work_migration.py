"""Migrations 0036_graph_work and 0038_graph_groups on stored rows: the held facts, the thoughts and
the final days count as shown by the graph written before, the taken-back facts and open days as
shown by nothing, and nobody is due at once, on both databases."""

from __future__ import annotations

import asyncio
from datetime import datetime

from alembic import command
from sqlalchemy import text

from db.engine import create_engine
from db.migrate import alembic_config

BEFORE = "0035_imports"
AT = datetime(2026, 3, 3, 9, 0)


async def test_held_facts_count_as_shown_and_nobody_is_due(empty_url: str) -> None:
    config = alembic_config(empty_url)
    await asyncio.to_thread(command.upgrade, config, BEFORE)
    engine = create_engine(empty_url)
    async with engine.begin() as conn:
        ana = (
            await conn.execute(
                text(
                    "INSERT INTO users (key, timezone, onboarding_status, profile, created_at)"
                    " VALUES ('cli:ana', 'UTC', 'complete', '{}', :at) RETURNING id"
                ),
                {"at": AT},
            )
        ).scalar_one()
        for content, key, gone in (("Ana plays the cello", "k-cello", None), ("Ana has a cat", "k-cat", AT)):
            await conn.execute(
                text(
                    "INSERT INTO user_facts (user_id, content, source, pinned, hidden, reinforced,"
                    " message_ids, dedupe_key, created_at, invalidated_at)"
                    " VALUES (:user, :content, 'extraction', false, false, 1, '[]', :key, :at, :gone)"
                ),
                {"user": ana, "content": content, "key": key, "at": AT, "gone": gone},
            )
        await conn.execute(
            text("INSERT INTO fact_consolidations (user_id, changed_at, attempts) VALUES (:user, :at, 0)"),
            {"user": ana, "at": AT},
        )
    await engine.dispose()

    await asyncio.to_thread(command.upgrade, config, "head")

    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        found = await conn.execute(text("SELECT content, graph_key FROM user_facts"))
        keys = {str(content): key for content, key in found.all()}
        marker = (
            await conn.execute(
                text("SELECT changed_at, graphed_for, graph_attempts FROM fact_consolidations")
            )
        ).one()
    await engine.dispose()
    assert keys == {"Ana plays the cello": "k-cello", "Ana has a cat": None}
    assert marker.graphed_for == marker.changed_at and marker.graph_attempts == 0


async def test_thoughts_and_final_days_count_as_shown_and_nobody_is_due(empty_url: str) -> None:
    config = alembic_config(empty_url)
    await asyncio.to_thread(command.upgrade, config, "0037_receipt")
    engine = create_engine(empty_url)
    async with engine.begin() as conn:
        ana = (
            await conn.execute(
                text(
                    "INSERT INTO users (key, timezone, onboarding_status, profile, created_at)"
                    " VALUES ('cli:ana', 'UTC', 'complete', '{}', :at) RETURNING id"
                ),
                {"at": AT},
            )
        ).scalar_one()
        await conn.execute(
            text(
                "INSERT INTO thoughts (user_id, content, dedupe_key, created_at)"
                " VALUES (:user, 'Ana seemed tired', 'k-tired', :at)"
            ),
            {"user": ana, "at": AT},
        )
        for day, status in ((1, "final"), (2, "open")):
            await conn.execute(
                text(
                    "INSERT INTO day_segments (user_id, day, timezone, first_message_at, last_message_at,"
                    " message_count, key_moments, messages_since_summary, summary_updated_at, summary_due,"
                    " status) VALUES (:user, :day, 'UTC', :at, :at, 1, '[]', 0, :at, false, :status)"
                ),
                {"user": ana, "day": AT.date().replace(day=day), "at": AT, "status": status},
            )
        await conn.execute(
            text(
                "INSERT INTO fact_consolidations (user_id, changed_at, graphed_for, attempts)"
                " VALUES (:user, :at, :at, 0)"
            ),
            {"user": ana, "at": AT},
        )
    await engine.dispose()

    await asyncio.to_thread(command.upgrade, config, "head")

    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        thought = (await conn.execute(text("SELECT graph_key FROM thoughts"))).scalar_one()
        days = (await conn.execute(text("SELECT status, graph_version FROM day_segments"))).all()
        marker = (
            await conn.execute(
                text("SELECT changed_at, graph_changed_at, graphed_for FROM fact_consolidations")
            )
        ).one()
    await engine.dispose()
    assert thought == "k-tired"
    assert {status: version is not None for status, version in days} == {"final": True, "open": False}
    assert marker.graph_changed_at == marker.changed_at == marker.graphed_for
