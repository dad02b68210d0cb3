"""graph work: what the knowledge graph shows of each fact, and whose facts it has yet to follow

Revision ID: 0036_graph_work
Revises: 0035_imports
Create Date: 2026-11-29 15:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0036_graph_work"
down_revision: str | Sequence[str] | None = "0035_imports"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("user_facts") as batch:
        batch.add_column(sa.Column("graph_key", sa.String(64), nullable=True))
    with op.batch_alter_table("fact_consolidations") as batch:
        batch.add_column(sa.Column("graphed_for", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("graph_lease_until", UTCDateTime(), nullable=True))
        batch.add_column(sa.Column("graph_attempts", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("graph_error", sa.Text(), nullable=True))
    # The graph written before showed every held fact: it follows from here, nobody due at once.
    op.execute("UPDATE user_facts SET graph_key = dedupe_key WHERE invalidated_at IS NULL")
    op.execute("UPDATE fact_consolidations SET graphed_for = changed_at")


def downgrade() -> None:
    with op.batch_alter_table("fact_consolidations") as batch:
        batch.drop_column("graph_error")
        batch.drop_column("graph_attempts")
        batch.drop_column("graph_lease_until")
        batch.drop_column("graphed_for")
    with op.batch_alter_table("user_facts") as batch:
        batch.drop_column("graph_key")
