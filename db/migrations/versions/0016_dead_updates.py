"""dead updates: an inbox row may have no update_id

An update whose id does not fit 64 bits is stored dead, with its reason, and no id.

Revision ID: 0016_dead_updates
Revises: 0015_access
Create Date: 2026-11-26 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016_dead_updates"
down_revision: str | Sequence[str] | None = "0015_access"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # SQLite rebuilds the table (nothing references inbox_updates); PostgreSQL drops NOT NULL.
    with op.batch_alter_table("inbox_updates") as batch:
        batch.alter_column("update_id", existing_type=sa.BigInteger(), nullable=True)


def downgrade() -> None:
    op.execute("DELETE FROM inbox_updates WHERE update_id IS NULL")
    with op.batch_alter_table("inbox_updates") as batch:
        batch.alter_column("update_id", existing_type=sa.BigInteger(), nullable=False)
