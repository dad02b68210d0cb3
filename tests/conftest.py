"""Shared fixtures: a real database (SQLite; PostgreSQL too for `both_databases` tests, always in CI)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic_ai import models
from sqlalchemy import event, text
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession, async_sessionmaker

import bot.logs
from bench.clock import FrozenClock
from db.engine import create_engine, session_factory
from db.migrate import head_revision, upgrade_to_head
from db.models import Base

models.ALLOW_MODEL_REQUESTS = False
os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
# No knowledge graph unless a test opts in (an embedded FalkorDB per runtime would slow every test).
os.environ.setdefault("GRAPH_BACKEND", "none")
# python-telegram-bot 22 warns on every time-like field unless it may return timedeltas.
os.environ.setdefault("PTB_TIMEDELTA", "1")


@event.listens_for(Engine, "connect")
def _unordered_rows_reversed(dbapi_connection: object, _record: object) -> None:
    """Every SQLite connection of the tests returns the rows of a query without ORDER BY in reverse.

    PostgreSQL returns such rows in whatever order its plan gives (and a test that compares them with a
    list fails there now and then); SQLite in the order it stores them, which is the order a test
    inserted them. Reversed, a read whose order nothing states fails on SQLite every time.
    """
    if "sqlite" in type(dbapi_connection).__module__:
        cursor = dbapi_connection.cursor()  # type: ignore[attr-defined]
        cursor.execute("PRAGMA reverse_unordered_selects = ON")
        cursor.close()


POSTGRES_ADMIN_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
ALL_ON_BOTH = os.environ.get("TEST_BOTH_DATABASES", "").lower() in {"1", "true", "yes"}


@pytest.fixture(autouse=True)
def _root_logger_kept() -> Iterator[None]:
    """No test leaves our log handler behind. An entry point run in the test's process (`main([...])`)
    logs to that test's captured stderr, which pytest closes afterwards: left on the root logger, the
    handler fails a later test's log lines in this worker ("--- Logging error ---" in its stderr)."""
    root = logging.getLogger()
    level, installed = root.level, bot.logs._installed
    yield
    if bot.logs._installed is not installed:
        if bot.logs._installed is not None:
            root.removeHandler(bot.logs._installed)
        bot.logs._installed = installed
    root.setLevel(level)


async def stamp_head(conn: AsyncConnection) -> None:
    """Record the newest revision on a schema made from the models, as `alembic stamp head` would, so
    the entry points that migrate a database behind it (jobs, web, the bot) find nothing to do."""
    await conn.execute(
        text("CREATE TABLE IF NOT EXISTS alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    )
    await conn.execute(text("DELETE FROM alembic_version"))
    await conn.execute(
        text("INSERT INTO alembic_version (version_num) VALUES (:head)"), {"head": head_revision()}
    )


async def _admin(sql: str) -> None:
    engine = create_engine(POSTGRES_ADMIN_URL, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str | None]:
    """A private database on the local PostgreSQL for this test run (so parallel runs never clash)."""
    name = f"nikita_test_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    try:
        asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    except (OSError, OperationalError, DBAPIError) as exc:
        if IN_CI:
            raise RuntimeError(f"PostgreSQL at {POSTGRES_ADMIN_URL} is unreachable in CI: {exc}") from exc
        yield None
        return
    base = POSTGRES_ADMIN_URL.rsplit("/", 1)[0]
    url = f"{base}/{name}"

    async def _create_schema() -> None:
        engine = create_engine(url, pool_size=1)
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
            await stamp_head(conn)
            shape = sorted((await conn.execute(text(_POSTGRES_SHAPE))).scalars())
        await engine.dispose()
        _EMPTY_POSTGRES[url] = _empty_postgres(shape)

    asyncio.run(_create_schema())
    yield url
    asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """`database_url` is SQLite; tests marked `both_databases` run on SQLite and on PostgreSQL.

    TEST_BOTH_DATABASES=1 runs every database test on both, to check that no unmarked test depends
    on the database.
    """
    if "database_url" in metafunc.fixturenames and (
        ALL_ON_BOTH or metafunc.definition.get_closest_marker("both_databases") is not None
    ):
        metafunc.parametrize("database_url", ["sqlite", "postgres"], indirect=True)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Slow tests first, then those that start processes, the rest in file order, so that the workers
    (handed tests two at a time) finish close together."""
    items.sort(
        key=lambda item: (item.get_closest_marker("slow") is None, item.get_closest_marker("process") is None)
    )


@pytest.fixture
def database_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A fresh SQLite file, or (`both_databases` tests, parametrized) the run's PostgreSQL database."""
    if getattr(request, "param", "sqlite") == "sqlite":
        path = tmp_path_factory.mktemp("db") / "nikita.db"
        return f"sqlite+aiosqlite:///{path}"
    url: str | None = request.getfixturevalue("postgres_url")
    if url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    return url


@pytest.fixture(scope="session")
def sqlite_schema(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file with the models' schema at the newest revision, made once per worker: a test's
    database starts as a copy of it (a copy takes a millisecond, making the schema about 90)."""
    path = tmp_path_factory.mktemp("schema") / "nikita.db"

    async def _create() -> None:
        engine = create_engine(f"sqlite+aiosqlite:///{path}", pool_size=1)
        async with engine.begin() as conn:
            await conn.run_sync(Base.metadata.create_all)
            await stamp_head(conn)
        await engine.dispose()  # the last connection's close folds the WAL into the file

    asyncio.run(_create())
    return path


@pytest.fixture(scope="session")
def migrated_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file brought to the newest revision by the migrations (Alembic), once per worker: a test
    that needs the migrated schema (what the product's processes find) starts from a copy of it."""
    path = tmp_path_factory.mktemp("migrated") / "nikita.db"
    upgrade_to_head(f"sqlite+aiosqlite:///{path}")
    return path


def migrated_sqlite_url(migrated: Path, file: Path) -> str:
    """`file` made a copy of the migrated SQLite file; its URL."""
    shutil.copyfile(migrated, file)
    return f"sqlite+aiosqlite:///{file}"


@pytest.fixture(scope="session")
def migrated_postgres(postgres_url: str | None) -> Iterator[str | None]:
    """A PostgreSQL database brought to the newest revision by the migrations, once per worker, that
    nobody connects to: `postgres_database` copies it (CREATE DATABASE ... TEMPLATE: a fifth of the
    time the migrations take). None when PostgreSQL is not reachable outside CI."""
    if postgres_url is None:
        yield None
        return
    name = f"nikita_migrated_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"'))
    try:
        upgrade_to_head(f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}")
        yield name
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@contextlib.contextmanager
def postgres_database(prefix: str, template: str | None = None) -> Iterator[str]:
    """A PostgreSQL database of its own (a copy of `template` when given, else empty), dropped after;
    its URL. For synchronous fixtures (a session-scoped fixture such as `migrated_postgres` cannot be
    set up from inside a test's event loop)."""
    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    asyncio.run(_admin(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
    try:
        yield f"{POSTGRES_ADMIN_URL.rsplit('/', 1)[0]}/{name}"
    finally:
        asyncio.run(_admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


# The run's PostgreSQL database emptied for the next test, in one statement: the rows deleted with
# triggers and foreign keys off for the transaction, and every column's sequence back at 1. About 4 ms
# where TRUNCATE ... RESTART IDENTITY took about 170 (it makes every table's files anew). The same
# statement checks first that the schema is still the one `postgres_url` made (a test's DDL that
# outlived it: a table dropped, renamed or added, a trigger or function left behind), and after, that
# every table is empty and no sequence has moved, naming what differs.
_POSTGRES_SHAPE = (
    "SELECT CASE relkind WHEN 'r' THEN 'table ' ELSE 'sequence ' END || relname FROM pg_class"
    " WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S')"
    " UNION ALL SELECT 'trigger ' || tgname || ' on ' || tgrelid::regclass FROM pg_trigger"
    " WHERE NOT tgisinternal"
    " AND tgrelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)"
    # Functions not in C (12 and 13 are the internal and C languages): the extensions' (btree_gin's) are.
    " UNION ALL SELECT 'function ' || proname FROM pg_proc"
    " WHERE pronamespace = 'public'::regnamespace AND prolang NOT IN (12, 13)"
)


def _empty_postgres(shape: list[str]) -> str:
    """The statement that checks the run's PostgreSQL schema is still `shape`, empties it, and checks that
    every table of the schema (the models' and any other) is empty and every sequence back at 1."""
    made = ", ".join("'" + name.replace("'", "''") + "'" for name in shape)
    models = [table.name for table in reversed(Base.metadata.sorted_tables)]
    tables = sorted(
        {name.removeprefix("table ") for name in shape if name.startswith("table ")} - {"alembic_version"}
    )
    any_rows = " OR ".join(f'EXISTS (SELECT FROM "{name}")' for name in tables)
    rows = " UNION ALL ".join(f"SELECT '{name}' WHERE EXISTS (SELECT FROM \"{name}\")" for name in tables)
    return (
        "DO $$ DECLARE differs text; BEGIN "
        "SELECT string_agg(coalesce(now.x, 'no ' || made.x), ', ') INTO differs "
        f"FROM ({_POSTGRES_SHAPE}) now(x) FULL JOIN unnest(ARRAY[{made}]::text[]) made(x) ON now.x = made.x "
        "WHERE now.x IS NULL OR made.x IS NULL; "
        "IF differs IS NOT NULL THEN RAISE EXCEPTION 'the test database''s schema was changed by an earlier "
        "test (its DDL outlived it): %', differs; END IF; "
        "SET LOCAL session_replication_role = replica; "
        + " ".join(f'DELETE FROM "{name}";' for name in models)
        + " PERFORM setval(s.oid, 1, false) FROM pg_class s JOIN pg_depend d ON d.objid = s.oid"
        " AND d.classid = 'pg_class'::regclass AND d.deptype IN ('a', 'i') WHERE s.relkind = 'S'; "
        f"IF {any_rows} THEN SELECT string_agg(x, ', ') INTO differs FROM ({rows}) rows(x); "
        "RAISE EXCEPTION 'tables not empty after the clean-up: %', differs; END IF; "
        "SELECT string_agg(sequencename, ', ') INTO differs FROM pg_sequences "
        "WHERE schemaname = 'public' AND last_value IS NOT NULL; "
        "IF differs IS NOT NULL THEN "
        "RAISE EXCEPTION 'sequences not back at 1 after the clean-up: %', differs; END IF; END $$"
    )


# Per PostgreSQL database of the run, its emptying statement, made once its schema is.
_EMPTY_POSTGRES: dict[str, str] = {}


def _copy_schema(database_url: str, schema: Path) -> bool:
    """A SQLite database not made yet starts as a copy of the worker's schema file; True if it did."""
    file = make_url(database_url).database if database_url.startswith("sqlite") else None
    if not file or file == ":memory:" or Path(file).exists():
        return False
    shutil.copyfile(schema, file)
    return True


@pytest.fixture
async def engine(database_url: str, sqlite_schema: Path) -> AsyncIterator[AsyncEngine]:
    """An engine on an empty schema."""
    copied = _copy_schema(database_url, sqlite_schema)
    eng = create_engine(database_url)
    async with eng.begin() as conn:
        if eng.dialect.name == "sqlite":
            if not copied:
                await conn.run_sync(Base.metadata.create_all)
                await stamp_head(conn)
        else:
            await conn.execute(text(_EMPTY_POSTGRES[database_url]))
    yield eng
    # Background work the code under test started and nobody awaited (the search index's catch-ups,
    # which `RecallIndex.settle` awaits in the product) finishes before the engine goes: a session
    # still checked out when the test's loop closes would be collected later, in another test.
    left = [
        task
        for task in asyncio.all_tasks()
        if not task.done() and getattr(task.get_coro(), "__qualname__", "").startswith("RecallIndex.")
    ]
    if left:
        await asyncio.wait(left, timeout=10)
    await eng.dispose()


@pytest.fixture
def sessions(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """The session factory the code under test uses."""
    return session_factory(engine)


@pytest.fixture
def clock() -> FrozenClock:
    """A clock fixed at a known Tuesday morning, moved only by the test."""
    return FrozenClock(current=datetime(2026, 3, 3, 9, 0, tzinfo=UTC))
