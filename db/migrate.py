"""Run Alembic migrations from code: `python -m bot migrate`, the app's start and the tests call this.

Alembic is imported only when a migration runs. The long-running bot migrates in a child process
(`upgrade_in_child`), so the migration machinery (Alembic, Mako, the revision scripts: about 10 MB)
never stays resident in a process that serves for days on a 512 MB instance.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_URL_VARIABLE = "DATABASE_URL"
_STEP = re.compile(r"Running upgrade (\S*) -> (\S+),")
logger = logging.getLogger(__name__)


class _Steps(logging.Handler):
    """Alembic's own lines, kept instead of printed: the upgrade is logged as one summary line."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.steps: list[tuple[str, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        """Keep each `Running upgrade a -> b` step; the other lines (plugins, DDL mode) say nothing new."""
        if match := _STEP.match(record.getMessage()):
            self.steps.append((match.group(1), match.group(2)))


class MigrationError(RuntimeError):
    """The schema upgrade failed; the message is the migration's own last line."""


def alembic_config(database_url: str) -> Config:
    """An Alembic config pointing at our migrations and the given database."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    return config


def upgrade_to_head(database_url: str) -> None:
    """Bring the schema to the newest revision (blocking; async code uses the twins)."""
    alembic_logger = logging.getLogger("alembic")
    steps = _Steps()
    level, propagate = alembic_logger.level, alembic_logger.propagate
    alembic_logger.setLevel(logging.INFO)
    alembic_logger.propagate = False
    alembic_logger.addHandler(steps)
    try:
        from alembic import command  # it announces its plugins when first imported

        command.upgrade(alembic_config(database_url), "head")
    finally:
        alembic_logger.removeHandler(steps)
        alembic_logger.setLevel(level)
        alembic_logger.propagate = propagate
    if steps.steps:
        first, last = steps.steps[0][0] or "empty", steps.steps[-1][1]
        logger.info("database schema upgraded", extra={"from": first, "to": last, "steps": len(steps.steps)})


async def upgrade_to_head_async(database_url: str) -> None:
    """Upgrade from async code without blocking the event loop (Alembic stays loaded afterwards)."""
    await asyncio.to_thread(upgrade_to_head, database_url)


async def upgrade_in_child(database_url: str) -> None:
    """Upgrade in a child Python process and wait for it; its error becomes a `MigrationError`.

    The URL travels in the child's environment, never on its command line (which `ps` shows).
    """
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "db.migrate",
        env=os.environ | {_URL_VARIABLE: database_url, "PYTHONPATH": _import_path()},
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await child.communicate()
    if child.returncode != 0:
        lines = [line for line in err.decode(errors="replace").splitlines() if line.strip()]
        raise MigrationError(f"schema upgrade failed: {lines[-1] if lines else f'exit {child.returncode}'}")


def _import_path() -> str:
    """PYTHONPATH for the child: this project's root first, so it imports this very code from any cwd."""
    inherited = os.environ.get("PYTHONPATH")
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join([root, inherited] if inherited else [root])


if __name__ == "__main__":
    upgrade_to_head(os.environ[_URL_VARIABLE])
