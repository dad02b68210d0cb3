"""reactions: stop presses on streamed drafts, and users' reactions to the bot's answers

Revision ID: 0029_reactions
Revises: 0028_user_memory
Create Date: 2026-11-26 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0029_reactions"
down_revision: str | Sequence[str] | None = "0028_user_memory"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "draft_stops",
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("draft_id", sa.BigInteger(), nullable=False),
        sa.Column("stopped_at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("chat_id", "draft_id", name=op.f("pk_draft_stops")),
    )
    op.create_index("ix_draft_stops_at", "draft_stops", ["stopped_at"])
    op.create_table(
        "message_reactions",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("message_id", _ID, nullable=False),
        sa.Column("emoji", sa.String(length=64), nullable=False),
        sa.Column("added", sa.Boolean(), nullable=False),
        sa.Column("reacted_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["message_id"],
            ["transcript_messages.id"],
            name=op.f("fk_message_reactions_message_id_transcript_messages"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_message_reactions_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_message_reactions")),
    )
    op.create_index("ix_message_reactions_user", "message_reactions", ["user_id", "reacted_at"])
    op.create_index("ix_message_reactions_message", "message_reactions", ["message_id"])


def downgrade() -> None:
    op.drop_table("message_reactions")
    op.drop_table("draft_stops")
