"""one head: joins the branches that grew from 0002 into a single line

Revision ID: 0014_one_head
Revises: 0005_compactions, 0006_search, 0007_inbox, 0008_privacy, 0009_recall, 0011_timeline,
    0012_voice, 0013_usage
Create Date: 2026-11-24 08:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

revision: str = "0014_one_head"
# Every later migration revises this one, so `alembic heads` names exactly one revision.
down_revision: str | Sequence[str] | None = (
    "0005_compactions",
    "0006_search",
    "0007_inbox",
    "0008_privacy",
    "0009_recall",
    "0011_timeline",
    "0012_voice",
    "0013_usage",
)
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
