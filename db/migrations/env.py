"""Alembic environment: async engine, URL from the config that `db.migrate` builds."""

from __future__ import annotations

import asyncio

from alembic import context
from sqlalchemy.engine import Connection

from db.engine import create_engine
from db.models import Base

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_async() -> None:
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("no database URL: run migrations with `python -m bot migrate`")
    # SQLite: foreign keys off while migrating, so a table rebuild never cascades (see create_engine);
    # a migration that rebuilds a parent table checks the keys itself (PRAGMA foreign_key_check).
    engine = create_engine(url, foreign_keys=False)
    async with engine.connect() as connection:
        await connection.run_sync(_run)
        await connection.commit()
    await engine.dispose()


if context.is_offline_mode():
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_async())
