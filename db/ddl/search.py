"""Full-text structures per dialect: FTS5 on SQLite, generated tsvector columns on PostgreSQL.

Shared by the Alembic migration and by `create_all` (`db.ddl.attach`), so tests and
production get the same structures. Both stay in sync with their tables by themselves (triggers,
generated columns) inside the writer's transaction, so a stored message is searchable at once.
What both do to the text first is in db/search_text.py.
"""

from __future__ import annotations

from db.search_text import CJK_CLASS, DEFAULT_LANGUAGE, FOLD_FROM, FOLD_TO, POSTGRES_CONFIGS

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
    "INSERT INTO transcript_fts(rowid, content, user_id) "
    "VALUES (new.id, nikita_search_text(new.content), new.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS transcript_fts_ad AFTER DELETE ON transcript_messages "
    "WHEN old.role != 'system' BEGIN "
    "INSERT INTO transcript_fts(transcript_fts, rowid, content, user_id) "
    "VALUES ('delete', old.id, nikita_search_text(old.content), old.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS transcript_fts_au AFTER UPDATE OF content, role, user_id "
    "ON transcript_messages BEGIN "
    "INSERT INTO transcript_fts(transcript_fts, rowid, content, user_id) "
    "SELECT 'delete', old.id, nikita_search_text(old.content), old.user_id WHERE old.role != 'system'; "
    "INSERT INTO transcript_fts(rowid, content, user_id) "
    "SELECT new.id, nikita_search_text(new.content), new.user_id WHERE new.role != 'system'; END",
]

SQLITE_SUMMARIES = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS day_summary_fts USING fts5("
    "summary, user_id, content='day_segments', content_rowid='id', "
    "tokenize='porter unicode61 remove_diacritics 2')",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_ai AFTER INSERT ON day_segments "
    "WHEN new.summary IS NOT NULL BEGIN "
    "INSERT INTO day_summary_fts(rowid, summary, user_id) "
    "VALUES (new.id, nikita_search_text(new.summary), new.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_ad AFTER DELETE ON day_segments "
    "WHEN old.summary IS NOT NULL BEGIN "
    "INSERT INTO day_summary_fts(day_summary_fts, rowid, summary, user_id) "
    "VALUES ('delete', old.id, nikita_search_text(old.summary), old.user_id); END",
    "CREATE TRIGGER IF NOT EXISTS day_summary_fts_au AFTER UPDATE OF summary, user_id ON day_segments BEGIN "
    "INSERT INTO day_summary_fts(day_summary_fts, rowid, summary, user_id) "
    "SELECT 'delete', old.id, nikita_search_text(old.summary), old.user_id WHERE old.summary IS NOT NULL; "
    "INSERT INTO day_summary_fts(rowid, summary, user_id) "
    "SELECT new.id, nikita_search_text(new.summary), new.user_id WHERE new.summary IS NOT NULL; END",
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

# PostgreSQL: each row carries the text-search configuration of its user's language
# (`search_config`, set by a trigger from `users.language` when the row is written, and rewritten
# for all of a user's rows when the language changes: agent/search/language.py), and a stored
# generated tsvector of its prepared text under that configuration. The ORM maps neither column.
_CONFIG_CASES = " ".join(
    f"WHEN '{code}' THEN '{config}'::regconfig" for code, config in sorted(POSTGRES_CONFIGS.items())
)
POSTGRES_FUNCTIONS = [
    "CREATE OR REPLACE FUNCTION nikita_search_config(language text) RETURNS regconfig "
    f"LANGUAGE sql IMMUTABLE AS $$ SELECT CASE coalesce(language, '{DEFAULT_LANGUAGE}') "
    f"{_CONFIG_CASES} ELSE 'simple'::regconfig END $$",
    "CREATE OR REPLACE FUNCTION nikita_row_search_config() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "BEGIN NEW.search_config := nikita_search_config((SELECT language FROM users WHERE id = NEW.user_id)); "
    "RETURN NEW; END $$",
]


def _prepared(column: str) -> str:
    """SQL for `search_text(column)` (db/search_text.py), immutable so a generated column may use it."""
    folded = f"translate(coalesce({column}, ''), '{FOLD_FROM}', '{FOLD_TO}')"
    return f"regexp_replace({folded}, '([{CJK_CLASS}])', ' \\1 ', 'g')"


def _postgres_table(table: str, column: str, tsv: str, trigger: str) -> list[str]:
    return [
        f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS search_config regconfig NOT NULL "
        f"DEFAULT '{POSTGRES_CONFIGS[DEFAULT_LANGUAGE]}'",
        f"DROP TRIGGER IF EXISTS {trigger} ON {table}",
        f"CREATE TRIGGER {trigger} BEFORE INSERT ON {table} "
        "FOR EACH ROW EXECUTE FUNCTION nikita_row_search_config()",
        f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {tsv} tsvector "
        f"GENERATED ALWAYS AS (to_tsvector(search_config, {_prepared(column)})) STORED",
    ]


# The message index holds the user beside the words (btree_gin, a contrib extension PostgreSQL,
# Cloud SQL and Heroku Postgres ship), so a user's matches come from one index scan instead of
# every user's matches intersected with the user's slice of a btree. A server without the
# extension (or a role that may not create it) gets the words-only index; searches still work.
POSTGRES_TRANSCRIPT_INDEX = [
    "DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS btree_gin; "
    "EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'btree_gin unavailable: words-only full-text index'; END $$",
    "DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'btree_gin') THEN "
    "CREATE INDEX IF NOT EXISTS ix_transcript_search_tsv ON transcript_messages "
    "USING GIN (user_id, search_tsv); "
    "ELSE CREATE INDEX IF NOT EXISTS ix_transcript_search_tsv ON transcript_messages "
    "USING GIN (search_tsv); END IF; END $$",
]

POSTGRES_TRANSCRIPT = [
    *POSTGRES_FUNCTIONS,
    *_postgres_table("transcript_messages", "content", "search_tsv", "transcript_search_config"),
    *POSTGRES_TRANSCRIPT_INDEX,
]

POSTGRES_SUMMARIES = [
    *POSTGRES_FUNCTIONS,
    *_postgres_table("day_segments", "summary", "summary_tsv", "day_segments_search_config"),
    "CREATE INDEX IF NOT EXISTS ix_day_segments_summary_tsv ON day_segments USING GIN (summary_tsv)",
]

POSTGRES_DROP = [
    "DROP INDEX IF EXISTS ix_transcript_search_tsv",
    "ALTER TABLE transcript_messages DROP COLUMN IF EXISTS search_tsv",
    "DROP TRIGGER IF EXISTS transcript_search_config ON transcript_messages",
    "ALTER TABLE transcript_messages DROP COLUMN IF EXISTS search_config",
    "DROP INDEX IF EXISTS ix_day_segments_summary_tsv",
    "ALTER TABLE day_segments DROP COLUMN IF EXISTS summary_tsv",
    "DROP TRIGGER IF EXISTS day_segments_search_config ON day_segments",
    "ALTER TABLE day_segments DROP COLUMN IF EXISTS search_config",
    "DROP FUNCTION IF EXISTS nikita_row_search_config()",
    "DROP FUNCTION IF EXISTS nikita_search_config(text)",
]


# SQLite: fill both FTS5 tables again from their content tables (the text prepared as the triggers do).
SQLITE_REFILL = [
    "INSERT INTO transcript_fts(transcript_fts) VALUES ('delete-all')",
    "INSERT INTO transcript_fts(rowid, content, user_id) "
    "SELECT id, nikita_search_text(content), user_id FROM transcript_messages WHERE role != 'system'",
    "INSERT INTO day_summary_fts(day_summary_fts) VALUES ('delete-all')",
    "INSERT INTO day_summary_fts(rowid, summary, user_id) "
    "SELECT id, nikita_search_text(summary), user_id FROM day_segments WHERE summary IS NOT NULL",
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
