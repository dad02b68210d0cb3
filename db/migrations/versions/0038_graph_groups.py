"""graph groups: what the knowledge graph shows of each final day's key moments and each thought, and
its own change signal

Revision ID: 0038_graph_groups
Revises: 0037_receipt
Create Date: 2026-11-29 18:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0038_graph_groups"
down_revision: str | Sequence[str] | None = "0037_receipt"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("day_segments") as batch:
        batch.add_column(sa.Column("graph_version", UTCDateTime(), nullable=True))
    with op.batch_alter_table("thoughts") as batch:
        batch.add_column(sa.Column("graph_key", sa.String(64), nullable=True))
    with op.batch_alter_table("fact_consolidations") as batch:
        batch.add_column(sa.Column("graph_changed_at", UTCDateTime(), nullable=True))
    op.execute("UPDATE fact_consolidations SET graph_changed_at = changed_at")
    with op.batch_alter_table("fact_consolidations") as batch:
        batch.alter_column("graph_changed_at", existing_type=UTCDateTime(), nullable=False)
    # Thoughts and final days already stored count as shown (as 0036 counted the facts): writing them
    # all at once would be a model call per thought and per moment for every person on upgrade. The
    # graph follows what changes after; `reindex --graph-from-facts` writes the rest when wanted.
    op.execute("UPDATE thoughts SET graph_key = dedupe_key")
    op.execute("UPDATE day_segments SET graph_version = summary_updated_at WHERE status = 'final'")


def downgrade() -> None:
    with op.batch_alter_table("fact_consolidations") as batch:
        batch.drop_column("graph_changed_at")
    with op.batch_alter_table("thoughts") as batch:
        batch.drop_column("graph_key")
    with op.batch_alter_table("day_segments") as batch:
        batch.drop_column("graph_version")
