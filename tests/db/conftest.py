"""Shared by the migration tests: an empty database on each backend."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import text

from db.engine import create_engine
from db.migrate import alembic_config
from tests.conftest import POSTGRES_ADMIN_URL, _admin


@pytest.fixture(params=["sqlite", "postgres"])
async def empty_url(
    request: pytest.FixtureRequest, tmp_path: Path, postgres_url: str | None
) -> AsyncIterator[str]:
    """A database with no schema at all, on each backend."""
    if request.param == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
        return
    if postgres_url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    name = f"nikita_migration_{uuid.uuid4().hex[:8]}"
    await _admin(f'CREATE DATABASE "{name}"')
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        await _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def user_at_revision(url: str, revision: str, at: datetime) -> int:
    """Migrate an empty database up to `revision` and store one person there; their id."""
    await asyncio.to_thread(command.upgrade, alembic_config(url), revision)
    engine = create_engine(url)
    person = text(
        "INSERT INTO users (key, timezone, onboarding_status, profile, created_at)"
        " VALUES ('cli:u', 'UTC', 'complete', '{}', :at) RETURNING id"
    )
    async with engine.begin() as conn:
        stored = await conn.execute(person, {"at": at})
        user_id = int(stored.scalar_one())
    await engine.dispose()
    return user_id
