"""access: admins' /allow and /deny rules, bot-wide daily counters, an index on model_usage.day

The counters count refused strangers and the budgets; the index serves the bot-wide budget's daily sum.

Revision ID: 0015_access
Revises: 0014_one_head
Create Date: 2026-11-24 08:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0015_access"
down_revision: str | Sequence[str] | None = "0014_one_head"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "access_rules",
        sa.Column("key", sa.String(length=40), nullable=False),
        sa.Column("rule", sa.String(length=8), nullable=False),
        sa.Column("changed_at", UTCDateTime(), nullable=False),
        sa.Column("changed_by", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_access_rules")),
    )
    op.create_table(
        "daily_counts",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("name", sa.String(length=32), nullable=False),
        sa.Column("count", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("day", "name", name=op.f("pk_daily_counts")),
    )
    op.create_index("ix_model_usage_day", "model_usage", ["day"])


def downgrade() -> None:
    op.drop_index("ix_model_usage_day", table_name="model_usage")
    op.drop_table("daily_counts")
    op.drop_table("access_rules")
