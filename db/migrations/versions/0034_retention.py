"""retention: the daily turn roll-up, and the indexes that find old and newest context snapshots

Revision ID: 0034_retention
Revises: 0033_fact_punctuation
Create Date: 2026-11-29 07:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0034_retention"
down_revision: str | Sequence[str] | None = "0033_fact_punctuation"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Schema only: the rows are slimmed and pruned by the `retention` job, in short batches on a live
    # database, never in this migration's one long transaction.
    op.create_table(
        "turn_days",
        sa.Column("day", sa.Date(), primary_key=True),
        sa.Column("turns", sa.Integer(), nullable=False),
        sa.Column("timed", sa.Integer(), nullable=False),
        sa.Column("p95_ms", sa.Float(), nullable=True),
    )
    op.create_index("ix_generated_prompts_conversation", "generated_prompts", ["conversation_id", "id"])
    op.create_index("ix_generated_prompts_created", "generated_prompts", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_generated_prompts_created", table_name="generated_prompts")
    op.drop_index("ix_generated_prompts_conversation", table_name="generated_prompts")
    op.drop_table("turn_days")
