"""The schema that SQLAlchemy's tables do not describe: full-text tables, triggers and functions.

Each module holds the statements of one structure per dialect, and the Alembic revisions run them
from here. `attach` has `create_all` (tests, scratch databases) run the same statements, so both
paths build one schema:

- `search`: the full-text index of messages and day summaries (FTS5 on SQLite, tsvector on PostgreSQL).
- `usage`: the triggers that keep the day's bot-wide token counter beside `model_usage`.
- `fts_english`: the first, English-only full-text structures, frozen for the revisions that built them.
"""

from __future__ import annotations

from sqlalchemy import DDL, MetaData, event

from db.ddl import search, usage


def attach(metadata: MetaData) -> None:
    """Create the full-text structures and the counter triggers whenever `create_all` makes the tables."""
    for table, by_dialect in (
        (
            "transcript_messages",
            {"sqlite": search.SQLITE_TRANSCRIPT, "postgresql": search.POSTGRES_TRANSCRIPT},
        ),
        ("day_segments", {"sqlite": search.SQLITE_SUMMARIES, "postgresql": search.POSTGRES_SUMMARIES}),
    ):
        for dialect, statements in by_dialect.items():
            for statement in statements:
                ddl = DDL(statement).execute_if(dialect=dialect)  # type: ignore[no-untyped-call]
                event.listen(metadata.tables[table], "after_create", ddl)
    # After every table: the triggers write to `daily_counts` when `model_usage` changes.
    for dialect in ("sqlite", "postgresql"):
        for statement in usage.upgrade_statements(dialect):
            event.listen(metadata, "after_create", DDL(statement).execute_if(dialect=dialect))  # type: ignore[no-untyped-call]
