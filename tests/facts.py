"""Facts stored without sources (as a test's starting memory): `FactRepository.add_sourced` with no
message ids."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from db.repositories.facts import FactRepository


async def add_facts(
    facts: FactRepository,
    owner_id: int,
    conversation_id: int | None,
    contents: Iterable[str],
    at: datetime,
    *,
    source: str,
    category: str | None = None,
    pinned: bool = False,
) -> int:
    """Store `contents` as the owner's facts; a fact already known is reinforced instead. How many are new."""
    pairs = [(content, ()) for content in contents]
    return await facts.add_sourced(
        owner_id, conversation_id, pairs, at, source=source, category=category, pinned=pinned
    )
