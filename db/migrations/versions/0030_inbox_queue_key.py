"""inbox queue key: rows are worked in order per conversation (the update's chat), not per sender

Revision ID: 0030_inbox_queue_key
Revises: 0029_reactions
Create Date: 2026-11-26 14:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0030_inbox_queue_key"
down_revision: str | Sequence[str] | None = "0029_reactions"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("inbox_updates") as batch:
        batch.add_column(sa.Column("queue_key", sa.BigInteger(), nullable=True))
    op.execute("UPDATE inbox_updates SET queue_key = COALESCE(chat_id, telegram_user_id)")
    op.drop_index("ix_inbox_updates_sender", table_name="inbox_updates")
    op.create_index("ix_inbox_updates_sender", "inbox_updates", ["telegram_user_id"])
    op.create_index("ix_inbox_updates_queue", "inbox_updates", ["queue_key", "status", "update_id"])


def downgrade() -> None:
    op.drop_index("ix_inbox_updates_queue", table_name="inbox_updates")
    op.drop_index("ix_inbox_updates_sender", table_name="inbox_updates")
    op.create_index("ix_inbox_updates_sender", "inbox_updates", ["telegram_user_id", "status", "update_id"])
    with op.batch_alter_table("inbox_updates") as batch:
        batch.drop_column("queue_key")
