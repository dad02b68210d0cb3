"""voice calls: conversation kind and call id, fact category

Revision ID: 0012_voice
Revises: 0002
Create Date: 2026-11-23 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_voice"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table rebuild on SQLite); existing rows become text.
    op.add_column(
        "conversations", sa.Column("kind", sa.String(length=16), server_default="text", nullable=False)
    )
    op.add_column("conversations", sa.Column("call_id", sa.String(length=128), nullable=True))
    # A unique index rather than a constraint: SQLite cannot add a constraint to an existing table.
    op.create_index("uq_conversations_call_id", "conversations", ["call_id"], unique=True)
    op.add_column("user_facts", sa.Column("category", sa.String(length=32), nullable=True))


def downgrade() -> None:
    op.drop_column("user_facts", "category")
    op.drop_index("uq_conversations_call_id", table_name="conversations")
    op.drop_column("conversations", "call_id")
    op.drop_column("conversations", "kind")
