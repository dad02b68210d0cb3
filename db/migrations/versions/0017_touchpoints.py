"""touchpoints: follow-ups the bot plans to send first, and each user's choice about them

Also users.followups (the user's choice) and users.unreachable_at (Telegram no longer delivers).

Revision ID: 0017_touchpoints
Revises: 0016_dead_updates
Create Date: 2026-11-27 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0017_touchpoints"
down_revision: str | Sequence[str] | None = "0016_dead_updates"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.add_column("users", sa.Column("followups", sa.Boolean(), nullable=True))
    op.add_column("users", sa.Column("unreachable_at", UTCDateTime(), nullable=True))
    op.create_table(
        "touchpoints",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("thread_id", _ID, nullable=True),
        sa.Column("conversation_id", _ID, nullable=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("planned_at", UTCDateTime(), nullable=False),
        sa.Column("lease_owner", sa.String(length=128), nullable=True),
        sa.Column("lease_expires_at", UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("text", sa.Text(), nullable=True),
        sa.Column("chunks_sent", sa.Integer(), nullable=False),
        sa.Column("transcript_message_id", sa.BigInteger(), nullable=True),
        sa.Column("sent_at", UTCDateTime(), nullable=True),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_touchpoints_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["thread_id"],
            ["conversation_threads.id"],
            name=op.f("fk_touchpoints_thread_id_conversation_threads"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_touchpoints_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_touchpoints")),
        sa.UniqueConstraint("user_id", "dedupe_key", name="uq_touchpoints_user_dedupe"),
    )
    op.create_index("ix_touchpoints_status_due", "touchpoints", ["status", "due_at"])
    op.create_index("ix_touchpoints_user_status", "touchpoints", ["user_id", "status"])


def downgrade() -> None:
    op.drop_index("ix_touchpoints_user_status", table_name="touchpoints")
    op.drop_index("ix_touchpoints_status_due", table_name="touchpoints")
    op.drop_table("touchpoints")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("unreachable_at")
        batch.drop_column("followups")
