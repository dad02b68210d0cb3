"""inbox: every Telegram update stored before it is acknowledged

Revision ID: 0007_inbox
Revises: 0002
Create Date: 2026-11-23 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0007_inbox"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "inbox_updates",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("update_id", sa.BigInteger(), nullable=False),
        sa.Column("telegram_user_id", sa.BigInteger(), nullable=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=True),
        sa.Column("user_id", _ID, nullable=True),
        sa.Column("payload", _JSON, nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("received_at", UTCDateTime(), nullable=False),
        sa.Column("available_at", UTCDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("reply_text", sa.Text(), nullable=True),
        sa.Column("reply_chunks_sent", sa.Integer(), nullable=False),
        sa.Column("resumed_sends", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("done_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_inbox_updates_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_inbox_updates")),
        sa.UniqueConstraint("update_id", name=op.f("uq_inbox_updates_update_id")),
    )
    op.create_index("ix_inbox_updates_status_update", "inbox_updates", ["status", "update_id"])
    op.create_index("ix_inbox_updates_sender", "inbox_updates", ["telegram_user_id", "status", "update_id"])
    op.create_index("ix_inbox_updates_done", "inbox_updates", ["done_at"])
    op.create_index(op.f("ix_inbox_updates_user_id"), "inbox_updates", ["user_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_inbox_updates_user_id"), table_name="inbox_updates")
    op.drop_index("ix_inbox_updates_done", table_name="inbox_updates")
    op.drop_index("ix_inbox_updates_sender", table_name="inbox_updates")
    op.drop_index("ix_inbox_updates_status_update", table_name="inbox_updates")
    op.drop_table("inbox_updates")
