"""history compactions: cached summaries of a session's older turns

Revision ID: 0005_compactions
Revises: 0002
Create Date: 2026-11-22 10:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0005_compactions"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "history_compactions",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("conversation_id", _ID, nullable=False),
        sa.Column("covered_messages", sa.Integer(), nullable=False),
        sa.Column("last_message_digest", sa.String(length=64), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("summary_tokens", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_history_compactions_conversation_id_conversations"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_history_compactions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history_compactions")),
        sa.UniqueConstraint("conversation_id", "covered_messages", name="uq_history_compactions_covered"),
    )
    op.create_index(op.f("ix_history_compactions_user_id"), "history_compactions", ["user_id"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_history_compactions_user_id"), table_name="history_compactions")
    op.drop_table("history_compactions")
