"""Migration 0033_fact_punctuation on stored facts: copies differing only in punctuation become one
fact (the held, pinned, most said one kept, with the others' sources), on both databases."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

from alembic import command
from sqlalchemy import text

from db.engine import create_engine
from db.migrate import alembic_config
from db.repositories.dedupe import dedupe_key, fact_dedupe_key

BEFORE = "0032_fact_profile"
AT = datetime(2026, 3, 3, 9, 0)
# (owner, content, pinned, reinforced, message ids, taken back)
FACTS = [
    ("ana", "Ana lives in Lisbon.", False, 1, [1], False),
    ("ana", "Ana, lives in Lisbon", True, 1, [2], False),  # pinned: the one kept
    ("ana", "Ana lives in “Lisbon”", False, 3, [3], False),
    ("ana", "ana lives in lisbon…", False, 1, [4], True),  # taken back: stays so
    ("ana", "Ana has a cat", False, 1, [], False),
    ("bo", "Ana lives in Lisbon.", False, 1, [], False),  # another owner's: never merged
]


async def test_copies_in_other_punctuation_become_one_fact(empty_url: str) -> None:
    config = alembic_config(empty_url)
    await asyncio.to_thread(command.upgrade, config, BEFORE)
    engine = create_engine(empty_url)
    owners: dict[str, int] = {}
    async with engine.begin() as conn:
        for key in ("ana", "bo"):
            owners[key] = (
                await conn.execute(
                    text(
                        "INSERT INTO users (key, timezone, onboarding_status, profile, created_at)"
                        " VALUES (:key, 'UTC', 'complete', '{}', :at) RETURNING id"
                    ),
                    {"key": f"cli:{key}", "at": AT},
                )
            ).scalar_one()
        for owner, content, pinned, said, ids, gone in FACTS:
            await conn.execute(
                text(
                    "INSERT INTO user_facts (user_id, content, source, pinned, hidden, reinforced,"
                    " message_ids, dedupe_key, created_at, invalidated_at)"
                    " VALUES (:user, :content, 'extraction', :pinned, false, :said, :ids, :key, :at, :gone)"
                ),
                {
                    "user": owners[owner],
                    "content": content,
                    "pinned": pinned,
                    "said": said,
                    "ids": json.dumps(ids),
                    "key": dedupe_key("fact", content),
                    "at": AT,
                    "gone": AT if gone else None,
                },
            )
    await engine.dispose()

    await asyncio.to_thread(command.upgrade, config, "head")

    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                text(
                    "SELECT id, user_id, content, dedupe_key, reinforced, message_ids, invalidated_at,"
                    " superseded_by FROM user_facts ORDER BY id"
                )
            )
        ).all()
    await engine.dispose()
    by_text = {(r.user_id, r.content): r for r in rows}
    kept = by_text[(owners["ana"], "Ana, lives in Lisbon")]
    ids = kept.message_ids if isinstance(kept.message_ids, list) else json.loads(kept.message_ids)
    assert (kept.dedupe_key, kept.invalidated_at, sorted(ids), kept.reinforced) == (
        fact_dedupe_key("Ana lives in Lisbon"),
        None,
        [1, 2, 3],
        5,
    )
    for content in ("Ana lives in Lisbon.", "Ana lives in “Lisbon”"):
        copy = by_text[(owners["ana"], content)]
        assert copy.invalidated_at is not None and copy.superseded_by == kept.id
    assert by_text[(owners["ana"], "ana lives in lisbon…")].superseded_by is None
    assert by_text[(owners["bo"], "Ana lives in Lisbon.")].invalidated_at is None
    assert len({(r.user_id, r.dedupe_key) for r in rows}) == len(rows)

    await asyncio.to_thread(command.downgrade, config, BEFORE)
    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        key = (
            await conn.execute(text("SELECT dedupe_key FROM user_facts WHERE id = :id"), {"id": kept.id})
        ).scalar_one()
    await engine.dispose()
    assert key == dedupe_key("fact", "Ana, lives in Lisbon")
