"""What the privacy tests look for: every trace of a user in the database, its indexes and the graph."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import Base


async def rows_of(sessions: async_sessionmaker[AsyncSession], user_id: int) -> dict[str, int]:
    """Rows of every table in `Base.metadata` that belong to the user (by user_id, or users.id)."""
    counts: dict[str, int] = {}
    async with sessions() as session:
        for table in Base.metadata.sorted_tables:
            column = table.c.id if table.name == "users" else table.c.get("user_id")
            if column is None:
                continue
            counts[table.name] = int(
                await session.scalar(select(func.count()).select_from(table).where(column == user_id)) or 0
            )
    return counts


async def full_text_hits(sessions: async_sessionmaker[AsyncSession], word: str) -> int:
    """Entries of the full-text indexes matching a word, whoever they belong to.

    SQLite: the FTS5 tables themselves (external content: a stale entry would still match).
    PostgreSQL: the stored tsvector columns.
    """
    async with sessions() as session:
        if session.get_bind().dialect.name == "sqlite":
            statements = [
                "SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH :word",
                "SELECT count(*) FROM day_summary_fts WHERE day_summary_fts MATCH :word",
            ]
        else:
            statements = [
                "SELECT count(*) FROM transcript_messages"
                " WHERE search_tsv @@ plainto_tsquery('english', :word)",
                "SELECT count(*) FROM day_segments WHERE summary_tsv @@ plainto_tsquery('english', :word)",
            ]
        total = 0
        for statement in statements:
            total += int(await session.scalar(text(statement), {"word": word}) or 0)
        return total


async def text_traces(sessions: async_sessionmaker[AsyncSession], words: list[str]) -> dict[str, int]:
    """Live rows holding any of the words, per table: every table there is, read raw.

    On SQLite that includes the FTS5 shadow tables (`*_data`, `*_idx`, `*_docsize`, `*_config`),
    whose blobs keep each term once per leaf page. Terms there are prefix-compressed against the term
    before them, so a word is looked for by its tail (all but its first two letters).
    """
    tails = [word.lower()[2:].encode() for word in words]
    found: dict[str, int] = {}
    async with sessions() as session:
        if session.get_bind().dialect.name == "sqlite":
            listing = "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        else:
            listing = (
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'"
            )
        names = sorted((await session.execute(text(listing))).scalars())
        for name in names:
            for row in await session.execute(text(f'SELECT * FROM "{name}"')):
                cells = [bytes(v) if isinstance(v, bytes | memoryview) else str(v).encode() for v in row]
                if any(tail in cell.lower() for cell in cells for tail in tails):
                    found[name] = found.get(name, 0) + 1
    return found
