"""user memory: reminders the user sets, each occurrence sent as a touchpoint of kind "reminder";
facts the user took back (user_facts.invalidated_at and invalid_reason)

Revision ID: 0028_user_memory
Revises: 0027_cache_usage
Create Date: 2026-11-26 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.models import UTCDateTime

revision: str = "0028_user_memory"
down_revision: str | Sequence[str] | None = "0027_cache_usage"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql")


def upgrade() -> None:
    op.create_table(
        "reminders",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("repeat", sa.String(length=16), nullable=False),
        sa.Column("days", _JSON, nullable=False),
        sa.Column("day_of_month", sa.Integer(), nullable=False),
        sa.Column("next_local", sa.String(length=16), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("source_message_id", sa.BigInteger(), nullable=True),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("sent_count", sa.Integer(), nullable=False),
        sa.Column("snoozed_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_reminders_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reminders")),
        sa.UniqueConstraint("user_id", "dedupe_key", name="uq_reminders_user_dedupe"),
    )
    op.create_index("ix_reminders_user_status", "reminders", ["user_id", "status"])
    with op.batch_alter_table("user_facts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("invalidated_at", UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("invalid_reason", sa.Text(), nullable=True))
    with op.batch_alter_table("touchpoints", schema=None) as batch_op:
        batch_op.add_column(sa.Column("reminder_id", _ID, nullable=True))
        batch_op.create_index("ix_touchpoints_reminder_id", ["reminder_id"], unique=False)
        batch_op.create_foreign_key(
            batch_op.f("fk_touchpoints_reminder_id_reminders"),
            "reminders",
            ["reminder_id"],
            ["id"],
            ondelete="CASCADE",
        )


def downgrade() -> None:
    with op.batch_alter_table("touchpoints", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_touchpoints_reminder_id_reminders"), type_="foreignkey")
        batch_op.drop_index("ix_touchpoints_reminder_id")
        batch_op.drop_column("reminder_id")
    with op.batch_alter_table("user_facts", schema=None) as batch_op:
        batch_op.drop_column("invalid_reason")
        batch_op.drop_column("invalidated_at")
    op.drop_index("ix_reminders_user_status", table_name="reminders")
    op.drop_table("reminders")
