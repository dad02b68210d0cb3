"""fact sources: each user fact lists the transcript messages it comes from

Revision ID: 0021_fact_sources
Revises: 0020_briefings
Create Date: 2026-11-24 21:40:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0021_fact_sources"
down_revision: str | Sequence[str] | None = "0020_briefings"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    op.add_column(
        "user_facts", sa.Column("message_ids", json_type, server_default=sa.text("'[]'"), nullable=False)
    )


def downgrade() -> None:
    with op.batch_alter_table("user_facts") as batch:
        batch.drop_column("message_ids")
