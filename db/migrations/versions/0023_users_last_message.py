"""users by last message: an index for the check-in finder and the start-up warm-up

Revision ID: 0023_users_last_message
Revises: 0022_search_languages
Create Date: 2026-11-25 00:35:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0023_users_last_message"
down_revision: str | Sequence[str] | None = "0022_search_languages"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_users_last_message_at", "users", ["last_message_at"])


def downgrade() -> None:
    op.drop_index("ix_users_last_message_at", table_name="users")
