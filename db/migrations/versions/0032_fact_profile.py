"""fact profile: pinned and hidden facts, reinforcement, plans' dates, supersession; the
consolidation state of each owner's facts

Revision ID: 0032_fact_profile
Revises: 0031_groups
Create Date: 2026-11-28 16:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0032_fact_profile"
down_revision: str | Sequence[str] | None = "0031_groups"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("user_facts") as batch:
        batch.add_column(sa.Column("pinned", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("hidden", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("reinforced", sa.Integer(), nullable=False, server_default="1"))
        batch.add_column(sa.Column("last_seen_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("updated_at", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("valid_until", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("superseded_by", sa.BigInteger(), nullable=True))
    op.execute("UPDATE user_facts SET last_seen_at = created_at")
    op.create_index("ix_user_facts_user_held", "user_facts", ["user_id", "invalidated_at"])
    op.create_table(
        "fact_consolidations",
        sa.Column("user_id", _ID, sa.ForeignKey("users.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("changed_at", UTCDateTime(), nullable=False),
        sa.Column("consolidated_for", UTCDateTime(), nullable=True),
        sa.Column("consolidated_at", UTCDateTime(), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("last_error", sa.Text(), nullable=True),
    )


def downgrade() -> None:
    op.drop_table("fact_consolidations")
    op.drop_index("ix_user_facts_user_held", table_name="user_facts")
    with op.batch_alter_table("user_facts") as batch:
        for column in (
            "superseded_by",
            "valid_until",
            "updated_at",
            "last_seen_at",
            "reinforced",
            "hidden",
            "pinned",
        ):
            batch.drop_column(column)
