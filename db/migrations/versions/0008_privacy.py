"""privacy: user ids never reused on SQLite, pending forgets, rate-limit events

Revision ID: 0008_privacy
Revises: 0002
Create Date: 2026-11-23 09:00:00.000000

SQLite reuses the largest rowid after it is deleted unless the table is AUTOINCREMENT, and a
forgotten user's id names their knowledge-graph groups and cache entries: `users` is rebuilt with
AUTOINCREMENT, keeping every row and id. The rebuild copies the table, drops the original and
renames the copy; it runs with foreign keys off (db/migrations/env.py), or the DROP would delete
every child row through ON DELETE CASCADE, and checks the keys afterwards. Ids forgotten before
this migration left no trace to read, so the sequence starts ID_GAP above the highest id still
present. PostgreSQL's sequence never goes back: nothing to rebuild there.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models import UTCDateTime

revision: str = "0008_privacy"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# Users forgotten before the upgrade may have held the ids just above today's highest one.
ID_GAP = 1000


def upgrade() -> None:
    op.create_table(
        "pending_forgets",
        sa.Column("user_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("requested_at", UTCDateTime(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_pending_forgets")),
    )
    op.create_table(
        "rate_limit_events",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("at", UTCDateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rate_limit_events")),
    )
    op.create_index("ix_rate_limit_events_subject", "rate_limit_events", ["subject", "scope", "at"])
    op.create_index("ix_rate_limit_events_at", "rate_limit_events", ["at"])
    if op.get_bind().dialect.name == "sqlite":
        _users_autoincrement()


def _users_autoincrement() -> None:
    bind = op.get_bind()
    if bind.exec_driver_sql("PRAGMA foreign_keys").scalar():
        raise RuntimeError("foreign keys must be off while users is rebuilt (see db/migrations/env.py)")
    with op.batch_alter_table("users", recreate="always", table_kwargs={"sqlite_autoincrement": True}):
        pass
    broken = bind.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        raise RuntimeError(f"rebuilding users broke {len(broken)} foreign keys: {broken[:5]}")
    highest = bind.exec_driver_sql("SELECT coalesce(max(id), 0) FROM users").scalar() or 0
    bind.exec_driver_sql("DELETE FROM sqlite_sequence WHERE name = 'users'")
    bind.exec_driver_sql(
        "INSERT INTO sqlite_sequence (name, seq) VALUES ('users', ?)", (int(highest) + ID_GAP,)
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        with op.batch_alter_table("users", recreate="always", table_kwargs={"sqlite_autoincrement": False}):
            pass
    op.drop_index("ix_rate_limit_events_at", table_name="rate_limit_events")
    op.drop_index("ix_rate_limit_events_subject", table_name="rate_limit_events")
    op.drop_table("rate_limit_events")
    op.drop_table("pending_forgets")
