"""`bench storage`'s generator writes what real turns write: the same rows, shapes and sizes, ids that
hold together per person, and a history the real retention job treats as it treats the real one."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from bench.clock import FrozenClock
from bench.common import scratch_database
from bench.storage import START, retain, talk
from bench.storage_gen import Template, read_template, replay
from db.engine import create_engine
from db.models import Base

PEOPLE, DAYS = 2, 3
COPIES = 2  # the recorded people written twice over: every id moves


def _size(value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, (dict, list)):
        return len(json.dumps(value))
    return len(value) if isinstance(value, (str, bytes)) else 1


async def _census(url: str) -> dict[str, tuple[int, Counter[str], int]]:
    """Per table: its rows, how many hold a value in each column, and the bytes of their values."""
    engine = create_engine(url)
    found = {}
    try:
        async with engine.connect() as conn:
            for table in Base.metadata.sorted_tables:
                rows = [dict(row._mapping) for row in (await conn.execute(select(table))).all()]
                filled = Counter(name for row in rows for name, value in row.items() if value is not None)
                found[table.name] = (len(rows), filled, sum(_size(v) for row in rows for v in row.values()))
    finally:
        await engine.dispose()
    return found


async def _recorded(url: str) -> Template:
    await talk(url, PEOPLE, DAYS, clock=FrozenClock(current=START))
    return await read_template(url, START, DAYS)


@pytest.mark.slow
@pytest.mark.both_databases
async def test_the_generator_writes_the_rows_real_turns_write(database_url: str, engine: AsyncEngine) -> None:
    async with scratch_database("sqlite") as real:
        assert real is not None
        template = await _recorded(real)
        await replay(database_url, template, PEOPLE * COPIES, DAYS)
        said, made = await _census(real), await _census(database_url)
        end = FrozenClock(current=START + timedelta(days=DAYS))
        said_retained = await retain(real, end, 1.0)

    assert said["transcript_messages"][0] == PEOPLE * DAYS * 7
    for name, (rows, filled, size) in said.items():
        times = 1 if name in template.shared else COPIES
        assert made[name][0] == rows * times, name
        assert made[name][1] == Counter({column: n * times for column, n in filled.items()}), name
        assert abs(made[name][2] - size * times) <= 0.1 * size * times, (name, made[name][2], size)

    # Each person's ids hold together: every message a chunk, a segment or a fact names is theirs.
    async with engine.connect() as conn:
        owner = {
            int(i): int(u) for i, u in await conn.execute(text("SELECT id, user_id FROM transcript_messages"))
        }
        chunks = (await conn.execute(text("SELECT user_id, message_ids FROM search_chunks"))).all()
        segments = (await conn.execute(text("SELECT user_id, first_message_id FROM day_segments"))).all()
        words = set(
            (
                await conn.execute(text("SELECT content FROM transcript_messages WHERE role = 'user'"))
            ).scalars()
        )
    listed = [(user, i) for user, ids in chunks for i in (json.loads(ids) if isinstance(ids, str) else ids)]
    assert listed and all(owner[i] == user for user, i in listed)
    assert all(owner[first] == user for user, first in segments)
    assert len(words) == COPIES * PEOPLE * DAYS * 3  # every message said in words of its own

    # The real retention job finds in the generated history what it finds in the real one.
    retained = await retain(database_url, end, 1.0)
    assert retained == {k: n * (1 if k == "days_rolled_up" else COPIES) for k, n in said_retained.items()}
