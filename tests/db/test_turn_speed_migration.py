"""Migration 0024_turn_speed on a database with usage: the day's token counters start equal to the
sums, follow later writes, and go away on downgrade."""

from __future__ import annotations

import asyncio
from datetime import datetime

from alembic import command
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.ddl.usage import TOKENS
from db.engine import create_engine
from db.migrate import alembic_config
from tests.db.conftest import user_at_revision

BEFORE = "0023_users_last_message"
AT = datetime(2026, 3, 3, 9, 0)


async def _usage(engine: AsyncEngine, user_id: int, day: str, kind: str, tokens: int) -> None:
    async with engine.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO model_usage (user_id, day, kind, calls, input_tokens, output_tokens)"
                " VALUES (:user, :day, :kind, 1, :tokens, 1)"
            ),
            {"user": user_id, "day": datetime.fromisoformat(day).date(), "kind": kind, "tokens": tokens},
        )


async def _counters(engine: AsyncEngine) -> dict[str, int]:
    async with engine.connect() as conn:
        rows = await conn.execute(
            text("SELECT day, count FROM daily_counts WHERE name = :name"), {"name": TOKENS}
        )
        return {str(day): int(count) for day, count in rows}


async def test_the_counters_are_filled_then_kept_then_dropped(empty_url: str) -> None:
    config = alembic_config(empty_url)
    user_id = await user_at_revision(empty_url, BEFORE, AT)
    engine = create_engine(empty_url)
    await _usage(engine, user_id, "2026-03-02", "chat", 99)
    await _usage(engine, user_id, "2026-03-03", "chat", 199)
    await _usage(engine, user_id, "2026-03-03", "graph", 299)
    await engine.dispose()

    await asyncio.to_thread(command.upgrade, config, "head")
    engine = create_engine(empty_url)
    try:
        assert await _counters(engine) == {"2026-03-02": 100, "2026-03-03": 500}
        await _usage(engine, user_id, "2026-03-03", "extraction", 49)
        assert await _counters(engine) == {"2026-03-02": 100, "2026-03-03": 550}
    finally:
        await engine.dispose()

    await asyncio.to_thread(command.downgrade, config, BEFORE)
    engine = create_engine(empty_url)
    try:
        assert await _counters(engine) == {}
        await _usage(engine, user_id, "2026-03-04", "chat", 9)  # no trigger left to count it
        assert await _counters(engine) == {}
    finally:
        await engine.dispose()
