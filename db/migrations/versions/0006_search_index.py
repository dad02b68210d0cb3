"""search index: transcript and day-summary full text, chunk embeddings

Revision ID: 0006_search
Revises: 0002
Create Date: 2026-11-22 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.ddl import fts_english as search_ddl
from db.models import UTCDateTime

revision: str = "0006_search"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "search_chunks",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("day_segment_id", _ID, nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("message_ids", _JSON, nullable=False),
        sa.Column("sections", _JSON, nullable=False),
        sa.Column("first_message_id", sa.BigInteger(), nullable=True),
        sa.Column("last_message_id", sa.BigInteger(), nullable=True),
        sa.Column("token_count", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("embedder", sa.String(length=64), nullable=False),
        sa.Column("dimensions", sa.Integer(), nullable=False),
        sa.Column("vectors", sa.LargeBinary(), nullable=False),
        sa.Column("last_sent_at", UTCDateTime(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_search_chunks_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["day_segment_id"],
            ["day_segments.id"],
            name=op.f("fk_search_chunks_day_segment_id_day_segments"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_search_chunks")),
    )
    op.create_index("ix_search_chunks_user", "search_chunks", ["user_id", "id"])
    op.create_index(op.f("ix_search_chunks_day_segment_id"), "search_chunks", ["day_segment_id"])
    dialect = op.get_bind().dialect.name
    for statement in search_ddl.upgrade_statements(dialect):
        op.execute(statement)
    if dialect == "sqlite":
        # Messages stored before this revision: fill the external-content indexes from their tables.
        op.execute(
            "INSERT INTO transcript_fts(rowid, content, user_id) "
            "SELECT id, content, user_id FROM transcript_messages WHERE role != 'system'"
        )
        op.execute(
            "INSERT INTO day_summary_fts(rowid, summary, user_id) "
            "SELECT id, summary, user_id FROM day_segments WHERE summary IS NOT NULL"
        )


def downgrade() -> None:
    for statement in search_ddl.downgrade_statements(op.get_bind().dialect.name):
        op.execute(statement)
    op.drop_index(op.f("ix_search_chunks_day_segment_id"), table_name="search_chunks")
    op.drop_index("ix_search_chunks_user", table_name="search_chunks")
    op.drop_table("search_chunks")
