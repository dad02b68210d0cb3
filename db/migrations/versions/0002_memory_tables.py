"""memory tables: day segments, threads, thoughts, user facts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22 08:57:35.533500
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

from db.models import UTCDateTime

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "day_segments",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("user_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("first_message_at", UTCDateTime(), nullable=False),
        sa.Column("last_message_at", UTCDateTime(), nullable=False),
        sa.Column("first_message_id", sa.BigInteger(), nullable=True),
        sa.Column("last_message_id", sa.BigInteger(), nullable=True),
        sa.Column("message_count", sa.Integer(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=True),
        sa.Column(
            "key_moments",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("messages_since_summary", sa.Integer(), nullable=False),
        sa.Column("last_summarized_message_id", sa.BigInteger(), nullable=True),
        sa.Column("summary_updated_at", UTCDateTime(), nullable=True),
        sa.Column("summary_due", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("finalized_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_day_segments_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_day_segments")),
        sa.UniqueConstraint("user_id", "day", name="uq_day_segments_user_day"),
    )
    op.create_table(
        "conversation_threads",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("user_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("conversation_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("type", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("resolved_at", UTCDateTime(), nullable=True),
        sa.Column("resolved_by_conversation_id", sa.BigInteger(), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_conversation_threads_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_conversation_threads_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_conversation_threads")),
        sa.UniqueConstraint("user_id", "dedupe_key", name="uq_threads_user_dedupe"),
    )
    with op.batch_alter_table("conversation_threads", schema=None) as batch_op:
        batch_op.create_index("ix_threads_user_status", ["user_id", "status"], unique=False)

    op.create_table(
        "thoughts",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("user_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("conversation_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("used_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_thoughts_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_thoughts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_thoughts")),
        sa.UniqueConstraint("user_id", "dedupe_key", name="uq_thoughts_user_dedupe"),
    )
    op.create_table(
        "user_facts",
        sa.Column(
            "id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), autoincrement=True, nullable=False
        ),
        sa.Column("user_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("conversation_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("source", sa.String(length=16), nullable=False),
        sa.Column("dedupe_key", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["conversation_id"],
            ["conversations.id"],
            name=op.f("fk_user_facts_conversation_id_conversations"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_user_facts_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_user_facts")),
        sa.UniqueConstraint("user_id", "dedupe_key", name="uq_user_facts_user_dedupe"),
    )
    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column(
                "extraction",
                sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
                nullable=True,
            )
        )

    with op.batch_alter_table("transcript_messages", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("day_segment_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=True)
        )
        batch_op.create_index(
            batch_op.f("ix_transcript_messages_day_segment_id"), ["day_segment_id"], unique=False
        )
        batch_op.create_foreign_key(
            batch_op.f("fk_transcript_messages_day_segment_id_day_segments"),
            "day_segments",
            ["day_segment_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    with op.batch_alter_table("transcript_messages", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("fk_transcript_messages_day_segment_id_day_segments"), type_="foreignkey"
        )
        batch_op.drop_index(batch_op.f("ix_transcript_messages_day_segment_id"))
        batch_op.drop_column("day_segment_id")

    with op.batch_alter_table("conversations", schema=None) as batch_op:
        batch_op.drop_column("extraction")

    op.drop_table("user_facts")
    op.drop_table("thoughts")
    with op.batch_alter_table("conversation_threads", schema=None) as batch_op:
        batch_op.drop_index("ix_threads_user_status")

    op.drop_table("conversation_threads")
    op.drop_table("day_segments")
