"""Benchmark plumbing: scratch databases on both backends and percentile printing."""

from __future__ import annotations

import shutil
import statistics
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from sqlalchemy import text
from sqlalchemy.exc import DBAPIError, OperationalError

from db.engine import create_engine
from db.migrate import upgrade_to_head_async

DEFAULT_POSTGRES_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/test"


def percentile(values: list[float], pct: float) -> float:
    """The pct-th percentile (nearest rank) of a non-empty list."""
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(pct / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def describe(values: list[float]) -> str:
    """p50 / p95 / mean in milliseconds."""
    return (
        f"p50 {percentile(values, 50):7.2f} ms  p95 {percentile(values, 95):7.2f} ms  "
        f"mean {statistics.fmean(values):7.2f} ms  (n={len(values)})"
    )


async def _admin(url: str, sql: str) -> None:
    engine = create_engine(url, pool_size=1)
    try:
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(text(sql))
    finally:
        await engine.dispose()


@asynccontextmanager
async def scratch_database(
    backend: str, postgres_url: str = DEFAULT_POSTGRES_URL
) -> AsyncIterator[str | None]:
    """A migrated, empty database that is removed afterwards; None when PostgreSQL is unreachable."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            url = f"sqlite+aiosqlite:///{Path(folder) / 'bench.db'}"
            await upgrade_to_head_async(url)
            yield url
        return
    name = f"nikita_bench_{uuid.uuid4().hex[:8]}"
    try:
        await _admin(postgres_url, f'CREATE DATABASE "{name}"')
    except (OSError, OperationalError, DBAPIError):
        yield None
        return
    url = f"{postgres_url.rsplit('/', 1)[0]}/{name}"
    try:
        await upgrade_to_head_async(url)
        yield url
    finally:
        await _admin(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@asynccontextmanager
async def database_copy(url: str, postgres_url: str = DEFAULT_POSTGRES_URL) -> AsyncIterator[str]:
    """A copy of a (scratch) database, removed afterwards: a file copy, or PostgreSQL's TEMPLATE."""
    if url.startswith("sqlite"):
        with tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "copy.db"
            shutil.copy(url.split("///", 1)[1], path)
            yield f"sqlite+aiosqlite:///{path}"
        return
    name = f"nikita_bench_{uuid.uuid4().hex[:8]}"
    # TEMPLATE needs the original to have no connections: its engines are disposed by then.
    await _admin(postgres_url, f'CREATE DATABASE "{name}" TEMPLATE "{url.rsplit("/", 1)[1]}"')
    try:
        yield f"{url.rsplit('/', 1)[0]}/{name}"
    finally:
        await _admin(postgres_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
