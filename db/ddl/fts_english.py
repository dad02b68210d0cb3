"""The full-text structures as revision 0006 created them (English only, the text indexed as
stored), frozen here so that revision and the downgrade of 0018 build exactly these whatever
db/ddl/search.py builds today.
"""

from __future__ import annotations

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

# PostgreSQL: stored generated tsvector columns with GIN indexes; the ORM never maps them.
POSTGRES_TRANSCRIPT = [
    "ALTER TABLE transcript_messages ADD COLUMN IF NOT EXISTS search_tsv tsvector "
    "GENERATED ALWAYS AS (to_tsvector('english'::regconfig, coalesce(content, ''))) STORED",
    "CREATE INDEX IF NOT EXISTS ix_transcript_search_tsv ON transcript_messages USING GIN (search_tsv)",
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
