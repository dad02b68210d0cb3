"""imports: histories brought from another assistant's export, and their conversations' ids

Revision ID: 0035_imports
Revises: 0034_retention
Create Date: 2026-11-29 09:00:00.000000
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0035_imports"
down_revision: str | Sequence[str] | None = "0034_retention"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "imports",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("user_id", _ID, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("file_name", sa.String(200), nullable=True),
        sa.Column("file_ref", sa.Text(), nullable=True),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("conversations_total", sa.Integer(), nullable=False),
        sa.Column("messages_total", sa.Integer(), nullable=False),
        sa.Column("conversations_stored", sa.Integer(), nullable=False),
        sa.Column("messages_stored", sa.Integer(), nullable=False),
        sa.Column("first_at", UTCDateTime(), nullable=True),
        sa.Column("last_at", UTCDateTime(), nullable=True),
        sa.Column("chat_id", sa.BigInteger(), nullable=True),
        sa.Column("progress_message_id", sa.BigInteger(), nullable=True),
        sa.Column("claimed_at", UTCDateTime(), nullable=True),
        sa.Column("claimed_by", sa.String(128), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=True),
        sa.Column("learned_at", UTCDateTime(), nullable=True),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_imports_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_imports")),
        sa.UniqueConstraint("user_id", "digest", name="uq_imports_user_digest"),
    )
    op.create_index("ix_imports_user_id", "imports", ["user_id"])
    with op.batch_alter_table("conversations") as batch:
        batch.add_column(sa.Column("import_id", _ID, nullable=True))
        batch.add_column(sa.Column("external_id", sa.String(200), nullable=True))
        batch.create_foreign_key(
            op.f("fk_conversations_import_id_imports"), "imports", ["import_id"], ["id"], ondelete="SET NULL"
        )
    op.create_index(
        "uq_conversations_user_external", "conversations", ["user_id", "external_id"], unique=True
    )


def downgrade() -> None:
    op.drop_index("uq_conversations_user_external", table_name="conversations")
    with op.batch_alter_table("conversations") as batch:
        batch.drop_constraint(op.f("fk_conversations_import_id_imports"), type_="foreignkey")
        batch.drop_column("external_id")
        batch.drop_column("import_id")
    op.drop_index("ix_imports_user_id", table_name="imports")
    op.drop_table("imports")
