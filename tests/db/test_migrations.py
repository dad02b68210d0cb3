"""Migrations: one head, and `upgrade head` builds the schema the models describe, on both databases."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection

from bot.bench.common import scratch_database
from db.engine import create_engine
from db.migrate import alembic_config
from db.schema import Base


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_migrations_match_the_models(backend: str, postgres_url: str | None) -> None:
    if backend == "postgres" and postgres_url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    async with scratch_database(backend) as url:
        assert url is not None
        engine = create_engine(url)
        async with engine.connect() as conn:
            differences = await conn.run_sync(_diff)
        await engine.dispose()
    # Search indexes created by dialect-specific DDL are not in the metadata; everything else must match.
    relevant = [d for d in differences if not _is_search_ddl(d)]
    assert relevant == []


def _is_search_ddl(difference: object) -> bool:
    text = repr(difference)
    return "fts" in text.lower() or "tsv" in text.lower()


def test_the_migrations_have_exactly_one_head() -> None:
    heads = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://")).get_heads()
    assert len(heads) == 1, f"several Alembic heads: {heads}; a new migration revises the newest one"
