"""Full-text structures per dialect: FTS5 on SQLite, generated tsvector columns on PostgreSQL.

Shared by the Alembic migration and by `create_all` (DDL events in db/models.py), so tests and
production get the same structures. Both stay in sync with their tables by themselves (triggers,
generated columns) inside the writer's transaction, so a stored message is searchable at once.
"""

from __future__ import annotations

# The FTS5 tables: each keeps its terms in shadow tables (`<name>_data`, `_idx`, `_docsize`, `_config`).
SQLITE_FTS_TABLES = ("transcript_fts", "day_summary_fts")

# SQLite: external-content FTS5 tables (the text lives once, in the base table). `user_id` is an
# indexed column so a user's matches are found through the index (`user_id : "42" AND ...`) rather
# than by filtering every user's matches; its bm25 weight is 0.
SQLITE_TRANSCRIPT = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS transcript_fts USING fts5("
    "content, user_id, content='transcript_messages', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    # System notes (day summaries copied into the transcript) are searched as summaries, not here.
    "CREATE TRIGGER IF NOT EXISTS transcript_fts_ai AFTER INSERT ON transcript_messages "
    "WHEN new.role != 'system' BEGIN "
    "INSERT INTO transcript_fts(rowid, content, user_id) VALUES (new.id, new.content, new.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS transcript_fts_ad AFTER DELETE ON transcript_messages "
    "WHEN old.role != 'system' BEGIN "
    "INSERT INTO transcript_fts(transcript_fts, rowid, content, user_id) "
    "VALUES ('delete', old.id, old.content, old.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS transcript_fts_au AFTER UPDATE OF content, role, user_id "
    "ON transcript_messages BEGIN "
    "INSERT INTO transcript_fts(transcript_fts, rowid, content, user_id) "
    "SELECT 'delete', old.id, old.content, old.user_id WHERE old.role != 'system'; "
    "INSERT INTO transcript_fts(rowid, content, user_id) "
    "SELECT new.id, new.content, new.user_id WHERE new.role != 'system'; END",
]

SQLITE_SUMMARIES = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS day_summary_fts USING fts5("
    "summary, user_id, content='day_segments', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_ai AFTER INSERT ON day_segments "
    "WHEN new.summary IS NOT NULL BEGIN "
    "INSERT INTO day_summary_fts(rowid, summary, user_id) VALUES (new.id, new.summary, new.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_ad AFTER DELETE ON day_segments "
    "WHEN old.summary IS NOT NULL BEGIN "
    "INSERT INTO day_summary_fts(day_summary_fts, rowid, summary, user_id) "
    "VALUES ('delete', old.id, old.summary, old.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_au AFTER UPDATE OF summary, user_id ON day_segments BEGIN "
    "INSERT INTO day_summary_fts(day_summary_fts, rowid, summary, user_id) "
    "SELECT 'delete', old.id, old.summary, old.user_id WHERE old.summary IS NOT NULL; "
    "INSERT INTO day_summary_fts(rowid, summary, user_id) "
    "SELECT new.id, new.summary, new.user_id WHERE new.summary IS NOT NULL; END",
]

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS transcript_fts_ai",
    "DROP TRIGGER IF EXISTS transcript_fts_ad",
    "DROP TRIGGER IF EXISTS transcript_fts_au",
    "DROP TABLE IF EXISTS transcript_fts",
    "DROP TRIGGER IF EXISTS day_summary_fts_ai",
    "DROP TRIGGER IF EXISTS day_summary_fts_ad",
    "DROP TRIGGER IF EXISTS day_summary_fts_au",
    "DROP TABLE IF EXISTS day_summary_fts",
]

# The message index holds the user beside the words (btree_gin, a contrib extension PostgreSQL,
# Cloud SQL and Heroku Postgres ship), so a user's matches come from one index scan instead of
# every user's matches intersected with the user's 100,000-row slice of a btree. A server without
# the extension (or a role that may not create it) gets the words-only index; searches still work.
POSTGRES_TRANSCRIPT_INDEX = [
    "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS btree_gin; "
    "EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'btree_gin unavailable: words-only full-text index'; END $$",
    "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') THEN "
    "CREATE INDEX IF NOT EXISTS ix_transcript_search_tsv ON transcript_messages "
    "USING GIN (user_id, search_tsv); "
    "ELSE CREATE INDEX IF NOT EXISTS ix_transcript_search_tsv ON transcript_messages "
    "USING GIN (search_tsv); END IF; END $$",
]

# PostgreSQL: stored generated tsvector columns with GIN indexes; the ORM never maps them.
POSTGRES_TRANSCRIPT = [
    "ALTER TABLE transcript_messages ADD COLUMN IF NOT EXISTS search_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(content, ''))) STORED",
    *POSTGRES_TRANSCRIPT_INDEX,
]

POSTGRES_SUMMARIES = [
    "ALTER TABLE day_segments ADD COLUMN IF NOT EXISTS summary_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(summary, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS ix_day_segments_summary_tsv ON day_segments USING GIN (summary_tsv)",
]

POSTGRES_DROP = [
    "DROP INDEX IF EXISTS ix_transcript_search_tsv",
    "ALTER TABLE transcript_messages DROP COLUMN IF EXISTS search_tsv",
    "DROP INDEX IF EXISTS ix_day_segments_summary_tsv",
    "ALTER TABLE day_segments DROP COLUMN IF EXISTS summary_tsv",
]


def upgrade_statements(dialect: str) -> list[str]:
    """Every statement that creates the full-text structures on this dialect."""
    if dialect == "sqlite":
        return [*SQLITE_TRANSCRIPT, *SQLITE_SUMMARIES]
    if dialect == "postgresql":
        return [*POSTGRES_TRANSCRIPT, *POSTGRES_SUMMARIES]
    return []


def downgrade_statements(dialect: str) -> list[str]:
    """Every statement that removes them."""
    return {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}.get(dialect, [])
