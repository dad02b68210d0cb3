"""groups: a group chat owns its memory as a person does; a group message keeps its speaker

Revision ID: 0031_groups
Revises: 0030_inbox_queue_key
Create Date: 2026-11-26 15:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0031_groups"
down_revision: str | Sequence[str] | None = "0030_inbox_queue_key"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("users", sa.Column("kind", sa.String(8), nullable=False, server_default="person"))
    op.add_column("users", sa.Column("chat_id", sa.BigInteger(), nullable=True))
    op.create_index("uq_users_chat_id", "users", ["chat_id"], unique=True)
    op.add_column("transcript_messages", sa.Column("speaker_telegram_id", sa.BigInteger(), nullable=True))
    op.add_column("transcript_messages", sa.Column("speaker_name", sa.String(200), nullable=True))
    op.create_index("ix_transcript_speaker", "transcript_messages", ["speaker_telegram_id"])


def downgrade() -> None:
    op.drop_index("ix_transcript_speaker", table_name="transcript_messages")
    with op.batch_alter_table("transcript_messages") as batch:
        batch.drop_column("speaker_name")
        batch.drop_column("speaker_telegram_id")
    op.drop_index("uq_users_chat_id", table_name="users")
    with op.batch_alter_table("users") as batch:
        batch.drop_column("chat_id")
        batch.drop_column("kind")
