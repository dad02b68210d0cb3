"""timeline: a day summary's regeneration requested from the Mini App

Revision ID: 0011_timeline
Revises: 0002
Create Date: 2026-11-23 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0011_timeline"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN on both databases (no table rebuild on SQLite).
    op.add_column("day_segments", sa.Column("regenerate_requested_at", UTCDateTime(), nullable=True))


def downgrade() -> None:
    op.drop_column("day_segments", "regenerate_requested_at")
