"""Migrations: one head, and `upgrade head` builds the schema the models describe, on both databases."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from bench.common import scratch_database
from db.engine import create_engine
from db.errors import MigrationError
from db.migrate import alembic_config, head_revision, schema_at_head, upgrade_in_child
from db.models import Base


def _diff(connection: Connection) -> list[object]:
    context = MigrationContext.configure(connection)
    return list(compare_metadata(context, Base.metadata))


# What Alembic's comparison does not see: the full-text tables (FTS5's virtual tables and their own
# tables on SQLite), triggers, functions and the indexes and columns of the search (db/ddl), each
# with its definition, whitespace aside.
_SQLITE_OBJECTS = (
    "SELECT type || ' ' || name || ' on ' || tbl_name || ': ' || coalesce(sql, '') FROM sqlite_master"
)
_POSTGRES_OBJECTS = (
    "SELECT 'trigger ' || tgname || ' on ' || tgrelid::regclass || ': ' || pg_get_triggerdef(t.oid)"
    " FROM pg_trigger t WHERE NOT tgisinternal"
    " AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)"
    " UNION ALL SELECT 'function ' || proname || ': ' || pg_get_functiondef(p.oid) FROM pg_proc p"
    " WHERE pronamespace = 'public'::regnamespace AND prolang NOT IN (12, 13)"
    " UNION ALL SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = 'public'"
    " UNION ALL SELECT 'column ' || table_name || '.' || column_name || ': ' || data_type || ' '"
    " || coalesce(generation_expression, '') FROM information_schema.columns WHERE table_schema = 'public'"
)


async def _objects(url: str) -> set[str]:
    """The database's tables, triggers, functions, indexes and columns, each with its definition (the
    models' own tables by name: their columns are Alembic's comparison, and SQLite keeps a table's
    text as the revisions that altered it left it)."""
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            query = _SQLITE_OBJECTS if engine.dialect.name == "sqlite" else _POSTGRES_OBJECTS
            rows = [" ".join(row.split()) for row in (await conn.execute(text(query))).scalars()]
    finally:
        await engine.dispose()
    models = {f"table {name} on {name}:" for name in Base.metadata.tables}
    return {
        row.split(": ", 1)[0] + ":" if row.split(": ", 1)[0] + ":" in models else row
        for row in rows
        if "alembic_version" not in row
    }


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_migrations_match_the_models(
    backend: str, postgres_url: str | None, sqlite_schema: Path
) -> None:
    if backend == "postgres" and postgres_url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    async with scratch_database(backend) as url:
        assert url is not None
        engine = create_engine(url)
        async with engine.connect() as conn:
            differences = await conn.run_sync(_diff)
        await engine.dispose()
        migrated = await _objects(url)
    # Search indexes created by dialect-specific DDL are not in the metadata; everything else must match.
    relevant = [d for d in differences if not _is_search_ddl(d)]
    assert relevant == []
    # The rest, full-text tables, triggers and functions included: what `create_all` made (with
    # db/ddl) for the tests, the run's PostgreSQL database or the worker's SQLite schema file.
    made = await _objects(postgres_url if backend == "postgres" else f"sqlite+aiosqlite:///{sqlite_schema}")
    assert sorted(made - migrated) == [], "create_all makes these, the migrations do not"
    assert sorted(migrated - made) == [], "the migrations make these, create_all does not"
    assert any(item.startswith("trigger ") for item in made)  # the comparison sees the triggers


def _is_search_ddl(difference: object) -> bool:
    text = repr(difference).lower()
    return any(part in text for part in ("fts", "tsv", "search_config"))


def test_the_migrations_have_exactly_one_head() -> None:
    heads = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://")).get_heads()
    assert len(heads) == 1, f"several Alembic heads: {heads}; a new migration revises the newest one"


async def test_the_head_and_a_database_at_it_are_known_without_alembic(tmp_path: Path) -> None:
    scripts = ScriptDirectory.from_config(alembic_config("sqlite+aiosqlite://"))
    assert head_revision() == scripts.get_current_head()
    url = f"sqlite+aiosqlite:///{tmp_path / 'at-head.db'}"
    assert not await schema_at_head(url)  # nothing there yet
    engine = create_engine(url)
    async with engine.begin() as conn:  # the models' tables, but no revision recorded
        await conn.run_sync(Base.metadata.create_all)
    await engine.dispose()
    assert not await schema_at_head(url)
    await asyncio.to_thread(command.stamp, alembic_config(url), "head")
    assert await schema_at_head(url)
    before = scripts.get_revision(scripts.get_current_head()).down_revision
    assert isinstance(before, str)
    await asyncio.to_thread(command.stamp, alembic_config(url), before)
    assert not await schema_at_head(url)


@pytest.mark.process
async def test_the_bot_migrates_in_a_child_process_from_any_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # where no `db` package can be imported from
    url = f"sqlite+aiosqlite:///{tmp_path / 'child.db'}"
    await upgrade_in_child(url)
    engine = create_engine(url)
    async with engine.connect() as conn:
        differences = await conn.run_sync(_diff)
        (version,) = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars()
    await engine.dispose()
    assert [d for d in differences if not _is_search_ddl(d)] == []
    assert [version] == ScriptDirectory.from_config(alembic_config(url)).get_heads()


@pytest.mark.process
async def test_a_failed_child_migration_says_why(tmp_path: Path) -> None:
    (tmp_path / "a file").write_text("not a directory")
    unreachable = f"sqlite+aiosqlite:///{tmp_path / 'a file' / 'bot.db'}"
    with pytest.raises(MigrationError, match=r"schema upgrade failed: .+") as failed:
        await upgrade_in_child(unreachable)
    assert "Traceback" not in str(failed.value)


def test_an_upgrade_is_one_log_line_and_nothing_when_at_head(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from db.migrate import upgrade_to_head

    caplog.set_level(logging.DEBUG)
    url = f"sqlite+aiosqlite:///{tmp_path}/one-line.db"
    upgrade_to_head(url)
    [line] = [r for r in caplog.records if r.name.startswith(("alembic", "db.migrate"))]
    assert line.getMessage() == "database schema upgraded"
    assert line.__dict__["from"] == "empty" and line.__dict__["steps"] > 1
    caplog.clear()
    upgrade_to_head(url)
    assert [r for r in caplog.records if r.name.startswith(("alembic", "db.migrate"))] == []
