"""What the privacy tests look for: every trace of a user in the database, its indexes and the graph."""

from __future__ import annotations

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.schema import Base


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
