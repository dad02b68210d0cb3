"""Pooled PostgreSQL connections are checked before use: one the server dropped is replaced."""

from __future__ import annotations

import pytest
from sqlalchemy import text

from db.engine import create_engine


async def test_a_connection_the_server_dropped_is_replaced_on_checkout(postgres_url: str | None) -> None:
    if postgres_url is None:
        pytest.skip("PostgreSQL is not reachable (outside CI)")
    engine = create_engine(postgres_url, pool_size=1)
    other = create_engine(postgres_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            first = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        # Back in the pool; now the server ends it (a restart, a proxy's idle timeout).
        async with other.connect() as conn:
            await conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": first})
        async with engine.connect() as conn:
            second = (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one()
        assert second != first
        # A connection that is alive is kept.
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one() == second
    finally:
        await engine.dispose()
        await other.dispose()
