"""receipt: one answer per message, held by a unique index on the answers' reply_to_id

Revision ID: 0037_receipt
Revises: 0036_graph_work
Create Date: 2026-11-29 15:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0037_receipt"
down_revision: str | Sequence[str] | None = "0036_graph_work"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ANSWER = sa.text("role = 'assistant'")


def upgrade() -> None:
    # A message answered twice keeps its first answer as the answer; the others stay, unlinked.
    op.execute(
        "UPDATE transcript_messages SET reply_to_id = NULL"
        " WHERE role = 'assistant' AND reply_to_id IS NOT NULL AND id NOT IN ("
        "SELECT min(id) FROM transcript_messages"
        " WHERE role = 'assistant' AND reply_to_id IS NOT NULL GROUP BY reply_to_id)"
    )
    op.create_index(
        "uq_transcript_answer",
        "transcript_messages",
        ["reply_to_id"],
        unique=True,
        postgresql_where=_ANSWER,
        sqlite_where=_ANSWER,
    )


def downgrade() -> None:
    op.drop_index("uq_transcript_answer", table_name="transcript_messages")
