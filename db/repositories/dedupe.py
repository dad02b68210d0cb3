"""Idempotent inserts: every memory row carries a `dedupe_key` (unique per user) and conflicting
inserts are skipped, so a rerun of a crashed job writes nothing twice."""

from __future__ import annotations

import hashlib
import re
import unicodedata
from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import Base


def normalise(text: str) -> str:
    """Lower case, single spaces, no trailing punctuation: what makes two wordings "the same"."""
    return re.sub(r"\s+", " ", text).strip().lower().rstrip(".!?")


def dedupe_key(*parts: object) -> str:
    """A stable 64-character key from the parts (text parts are normalised first)."""
    raw = "\x1f".join(normalise(p) if isinstance(p, str) else str(p) for p in parts)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


# Apostrophes join a word's parts ("Ana's", "aujourd'hui"): dropped, not turned into a space.
_APOSTROPHES = frozenset("'\u2019\u02bc\u2018`\u00b4")


def _fact_character(char: str) -> str:
    if char in _APOSTROPHES:
        return ""
    kind = unicodedata.category(char)
    if kind == "Cf":  # invisible: zero-width joiners and spaces, soft hyphens
        return ""
    # Punctuation and separators part words; letters, marks, digits and symbols of any script stay.
    return " " if kind[0] in "PZC" else char


def normalise_fact(text: str) -> str:
    """What makes two wordings of a fact one fact: the same letters, digits and symbols (any
    script, compatibility forms folded), whatever their case, spacing and punctuation."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(_fact_character(c) for c in folded).split())


def fact_dedupe_key(content: str) -> str:
    """Facts dedupe on content alone: the same fact learnt twice is one fact."""
    raw = "fact\x1f" + normalise_fact(content)
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()


async def insert_ignoring_duplicates(
    session: AsyncSession, model: type[Base], rows: list[dict[str, Any]]
) -> int:
    """Insert `rows`, skipping those whose (user_id, dedupe_key) is already stored; how many are new."""
    if not rows:
        return 0
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    stmt = insert(model).values(rows).on_conflict_do_nothing(index_elements=["user_id", "dedupe_key"])
    result = await session.execute(stmt)
    return int(result.rowcount or 0)  # type: ignore[attr-defined]


def unique_by_key(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first row of each `dedupe_key`, in order."""
    # One statement may not carry the same key twice (PostgreSQL refuses ON CONFLICT on it).
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["dedupe_key"], row)
    return list(seen.values())
