"""fact keys: copies of a fact that differ only in case, spacing or punctuation are one fact

Every fact's dedupe_key is computed again (in batches) with the key that ignores punctuation. Facts
of one owner that now share a key become one: the one kept is the held one (then the pinned one,
the most said, the oldest), which gains the others' sources and counts; a held copy is superseded
by it (kept, with when and why) and every copy gets a key of its own.

Revision ID: 0033_fact_punctuation
Revises: 0032_fact_profile
Create Date: 2026-11-29 06:30:00.000000
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

from db.base import JSONType, UTCDateTime
from db.repositories.dedupe import dedupe_key, fact_dedupe_key

revision: str = "0033_fact_punctuation"
down_revision: str | Sequence[str] | None = "0032_fact_profile"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 1000
REASON = "the same fact in other punctuation"

_facts = sa.table(
    "user_facts",
    sa.column("id", sa.BigInteger()),
    sa.column("user_id", sa.BigInteger()),
    sa.column("content", sa.Text()),
    sa.column("dedupe_key", sa.String(64)),
    sa.column("pinned", sa.Boolean()),
    sa.column("reinforced", sa.Integer()),
    sa.column("message_ids", JSONType),
    sa.column("invalidated_at", UTCDateTime()),
    sa.column("invalid_reason", sa.Text()),
    sa.column("superseded_by", sa.BigInteger()),
    sa.column("updated_at", UTCDateTime()),
)


def _copy_key(fact_id: int) -> str:
    """A copy's own key: never a content's key, so it never meets another fact's."""
    return hashlib.sha256(f"fact-copy\x1f{fact_id}".encode()).hexdigest()


def _keep_first(row: Any) -> tuple[bool, bool, int, int]:
    return (row.invalidated_at is not None, not row.pinned, -(row.reinforced or 1), row.id)


def upgrade() -> None:
    bind = op.get_bind()
    groups: dict[tuple[int, str], list[Any]] = {}
    last = 0
    while True:
        rows = bind.execute(
            sa.select(
                _facts.c.id,
                _facts.c.user_id,
                _facts.c.content,
                _facts.c.dedupe_key,
                _facts.c.pinned,
                _facts.c.reinforced,
                _facts.c.message_ids,
                _facts.c.invalidated_at,
            )
            .where(_facts.c.id > last)
            .order_by(_facts.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        last = rows[-1].id
        for row in rows:
            groups.setdefault((row.user_id, fact_dedupe_key(row.content)), []).append(row)
    now = datetime.now(UTC)
    copies: list[dict[str, Any]] = []
    keys: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    for (_, key), rows in groups.items():
        keeper, *others = sorted(rows, key=_keep_first)
        if keeper.dedupe_key != key:
            keys.append({"fact_id": keeper.id, "key": key})
        held = [r for r in others if r.invalidated_at is None]
        for row in others:
            copy = {"fact_id": row.id, "key": _copy_key(row.id), "by": None, "at": row.invalidated_at}
            if row.invalidated_at is None:
                copy |= {"by": keeper.id, "at": now}
            copies.append(copy)
        if held and keeper.invalidated_at is None:
            sources = {int(i) for r in [keeper, *held] for i in r.message_ids or []}
            said = sum(r.reinforced or 1 for r in [keeper, *held])
            kept.append({"fact_id": keeper.id, "ids": sorted(sources), "said": said, "at": now})
    # The copies first: their own keys free the content keys the kept facts take.
    for start in range(0, len(copies), BATCH):
        for copy in copies[start : start + BATCH]:
            values: dict[str, Any] = {"dedupe_key": copy["key"]}
            if copy["by"] is not None:
                values |= {
                    "invalidated_at": copy["at"],
                    "invalid_reason": REASON,
                    "superseded_by": copy["by"],
                    "updated_at": copy["at"],
                }
            bind.execute(sa.update(_facts).where(_facts.c.id == copy["fact_id"]).values(**values))
    for start in range(0, len(keys), BATCH):
        bind.execute(
            sa.update(_facts)
            .where(_facts.c.id == sa.bindparam("fact_id"))
            .values(dedupe_key=sa.bindparam("key")),
            keys[start : start + BATCH],
        )
    for merged in kept:
        bind.execute(
            sa.update(_facts)
            .where(_facts.c.id == merged["fact_id"])
            .values(message_ids=merged["ids"], reinforced=merged["said"], updated_at=merged["at"])
        )


def downgrade() -> None:
    # The older key: case, spacing and final punctuation aside. It tells more wordings apart than
    # this one, so no two facts meet; a merged copy keeps its own key and stays superseded.
    bind = op.get_bind()
    last = 0
    while True:
        rows = bind.execute(
            sa.select(_facts.c.id, _facts.c.content, _facts.c.dedupe_key)
            .where(_facts.c.id > last)
            .order_by(_facts.c.id)
            .limit(BATCH)
        ).all()
        if not rows:
            break
        last = rows[-1].id
        keys = [
            {"fact_id": r.id, "key": dedupe_key("fact", r.content)}
            for r in rows
            if r.dedupe_key != _copy_key(r.id)
        ]
        if keys:
            bind.execute(
                sa.update(_facts)
                .where(_facts.c.id == sa.bindparam("fact_id"))
                .values(dedupe_key=sa.bindparam("key")),
                keys,
            )
