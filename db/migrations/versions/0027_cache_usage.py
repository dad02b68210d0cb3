"""cache usage: prompt-cache reads and writes per user, day and kind in model_usage

Rows written before count 0 (nothing was known to be cached). The day's token counter and its
triggers are unchanged: the budgets count input tokens, which include the cached ones.

Revision ID: 0027_cache_usage
Revises: 0024_turn_speed
Create Date: 2026-11-26 12:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027_cache_usage"
down_revision: str | Sequence[str] | None = "0024_turn_speed"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = ("cache_read_tokens", "cache_write_tokens", "cache_write_1h_tokens")


def upgrade() -> None:
    for name in COLUMNS:
        op.add_column("model_usage", sa.Column(name, sa.BigInteger(), server_default="0", nullable=False))


def downgrade() -> None:
    # A plain DROP COLUMN (SQLite 3.35+): rebuilding the table would drop its counter triggers.
    for name in reversed(COLUMNS):
        op.drop_column("model_usage", name)
