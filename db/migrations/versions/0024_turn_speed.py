"""turn speed: the day's bot-wide token total kept in daily_counts by triggers on model_usage

The bot-wide budget reads one row before a turn instead of summing the day's usage.

Revision ID: 0024_turn_speed
Revises: 0023_users_last_message
Create Date: 2026-11-25 00:30:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from db.ddl import usage as usage_ddl

revision: str = "0024_turn_speed"
down_revision: str | Sequence[str] | None = "0023_users_last_message"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    # Triggers first: on PostgreSQL they lock model_usage against writers until this commits, so
    # the fill that follows counts every row written before and the triggers every row after.
    for statement in [*usage_ddl.upgrade_statements(dialect), *usage_ddl.FILL]:
        op.execute(statement)


def downgrade() -> None:
    for statement in usage_ddl.downgrade_statements(op.get_bind().dialect.name):
        op.execute(statement)
