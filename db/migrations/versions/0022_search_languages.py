"""search languages and speed: a language per user, each row indexed under its user's language

PostgreSQL indexes each row under its user's language; both databases fold accents and index
Chinese and Japanese characters one by one; PostgreSQL's message full-text index holds the user
beside the words.

Revision ID: 0022_search_languages
Revises: 0021_fact_sources
Create Date: 2026-11-24 22:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.ddl import fts_english
from db.ddl import search as search_ddl

revision: str = "0022_search_languages"
down_revision: str | Sequence[str] | None = "0021_fact_sources"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _sqlite_triggers(statements: list[str]) -> list[str]:
    return [s for s in statements if s.startswith("CREATE TRIGGER")]


def upgrade() -> None:
    op.add_column("users", sa.Column("language", sa.String(length=8), nullable=True))
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        # Every existing row is rewritten once with its tsvector under `english` (what it had).
        for statement in search_ddl.POSTGRES_DROP:
            op.execute(statement)
        for statement in search_ddl.upgrade_statements(dialect):
            op.execute(statement)
    elif dialect == "sqlite":
        for statement in search_ddl.SQLITE_DROP:
            if statement.startswith("DROP TRIGGER"):
                op.execute(statement)
        for statement in _sqlite_triggers([*search_ddl.SQLITE_TRANSCRIPT, *search_ddl.SQLITE_SUMMARIES]):
            op.execute(statement)
        for statement in search_ddl.SQLITE_REFILL:
            op.execute(statement)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    if dialect == "postgresql":
        for statement in [*search_ddl.POSTGRES_DROP, *fts_english.upgrade_statements(dialect)]:
            op.execute(statement)
    elif dialect == "sqlite":
        for statement in search_ddl.SQLITE_DROP:
            if statement.startswith("DROP TRIGGER"):
                op.execute(statement)
        for statement in _sqlite_triggers([*fts_english.SQLITE_TRANSCRIPT, *fts_english.SQLITE_SUMMARIES]):
            op.execute(statement)
        for statement in search_ddl.SQLITE_REFILL:
            op.execute(
                statement.replace("nikita_search_text(content)", "content").replace(
                    "nikita_search_text(summary)", "summary"
                )
            )
    with op.batch_alter_table("users") as batch:
        batch.drop_column("language")
