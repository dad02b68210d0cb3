"""Run Alembic migrations from code: `python -m bot migrate`, the app's start and the tests call this.

Alembic is imported only when a migration runs. The long-running bot migrates in a child process
(`upgrade_in_child`), so the migration machinery (Alembic, Mako, the revision scripts: about 10 MB)
never stays resident in a process that serves for days on a 512 MB instance. Every entry point
that serves or runs jobs starts with `upgrade_unless_at_head`: a database already at the newest
revision (a restart's usual case) costs one query instead of that second Python process.
"""

from __future__ import annotations

import ast
import asyncio
import logging
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from db.errors import MigrationError

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


def head_revision() -> str | None:
    """The newest revision, read from the revision files without running them (Alembic would import
    each); None unless there is exactly one head."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted((MIGRATIONS_DIR / "versions").glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if "revision" in names:
                revisions.add(ast.literal_eval(node.value))
            elif "down_revision" in names and (value := ast.literal_eval(node.value)):
                parents.update([value] if isinstance(value, str) else value)
    heads = revisions - parents
    return heads.pop() if len(heads) == 1 else None


async def schema_at_head(database_url: str) -> bool:
    """Whether the database records the newest revision (False when it has no schema at all)."""
    from sqlalchemy import text
    from sqlalchemy.exc import SQLAlchemyError

    from db.engine import create_engine

    head = head_revision()
    if head is None:
        return False
    engine = create_engine(database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            versions = list(await conn.scalars(text("SELECT version_num FROM alembic_version")))
    except SQLAlchemyError:  # no version table: a database never migrated
        return False
    finally:
        await engine.dispose()
    return versions == [head]


async def upgrade_unless_at_head(database_url: str) -> None:
    """`upgrade_in_child`, unless the database is at the newest revision already."""
    if not await schema_at_head(database_url):
        await upgrade_in_child(database_url)


def _import_path() -> str:
    """PYTHONPATH for the child: this project's root first, so it imports this very code from any cwd."""
    inherited = os.environ.get("PYTHONPATH")
    root = str(Path(__file__).resolve().parents[1])
    return os.pathsep.join([root, inherited] if inherited else [root])


if __name__ == "__main__":
    upgrade_to_head(os.environ[_URL_VARIABLE])
