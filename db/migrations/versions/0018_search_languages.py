"""search languages and speed: the message full-text index holds the user beside the words

Revision ID: 0018_search_languages
Revises: 0016_dead_updates
Create Date: 2026-11-24 22:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from db import search_ddl

revision: str = "0018_search_languages"
down_revision: str | Sequence[str] | None = "0016_dead_updates"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_transcript_search_tsv")
        for statement in search_ddl.POSTGRES_TRANSCRIPT_INDEX:
            op.execute(statement)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX IF EXISTS ix_transcript_search_tsv")
        op.execute("CREATE INDEX ix_transcript_search_tsv ON transcript_messages USING GIN (search_tsv)")
