"""Shared by the migration tests: an empty database on each backend."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

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
