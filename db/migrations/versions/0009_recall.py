"""recall: neighbour look-ups by day and id

conversation_search reads the previous and next message of a day for each candidate; without an
index on (day_segment_id, id), PostgreSQL answered "the latest message of this day before id N"
by walking the primary key, through the whole table when the message opened its day.

Revision ID: 0009_recall
Revises: 0002
Create Date: 2026-11-23 07:20:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0009_recall"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_transcript_day_id", "transcript_messages", ["day_segment_id", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_transcript_day_id", table_name="transcript_messages")
