"""Run Alembic migrations from code: `python -m bot migrate` and the app's start both call this."""

from __future__ import annotations

import asyncio
from pathlib import Path

from alembic import command
from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at our migrations and the given database."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the schema to the newest revision (blocking; async code uses the twin)."""
    command.upgrade(alembic_config(database_url), "head")


async def upgrade_to_head_async(database_url: str) -> None:
    """Upgrade from async code without blocking the event loop."""
    await asyncio.to_thread(upgrade_to_head, database_url)
