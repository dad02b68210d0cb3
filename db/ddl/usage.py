"""The day's bot-wide token total, kept by the database beside `model_usage`.

`daily_counts` holds one row per UTC day named `TOKENS` whose count is the sum of that day's
`model_usage` input and output tokens, every user and kind (input includes the prompt-cache reads
and writes, so the cache columns are not added again). Triggers on `model_usage` add each
insert, update and delete to it in the writer's own transaction, cascaded deletes of a forgotten
user included, so the total is exact whichever process or job wrote, and the bot-wide budget reads
one row instead of summing the day's rows before every turn.

On PostgreSQL the counter row is locked from a usage write until its transaction ends, so every
writer stores its usage as the last write of its transaction: a transaction holding the counter
then waits for no other row, and concurrent writers queue on it without a deadlock.

Shared by the Alembic migration and by `create_all` (`db.ddl.attach`).
"""

from __future__ import annotations

TOKENS = "model_tokens"

_SPENT = "input_tokens + output_tokens"

SQLITE = [
    "CREATE TRIGGER IF NOT EXISTS model_usage_tokens_ai AFTER INSERT ON model_usage BEGIN "
    "INSERT INTO daily_counts (day, name, count) "
    f"VALUES (new.day, '{TOKENS}', new.input_tokens + new.output_tokens) "
    "ON CONFLICT (day, name) DO UPDATE SET count = count + excluded.count; END",
    "CREATE TRIGGER IF NOT EXISTS model_usage_tokens_au AFTER UPDATE OF day, input_tokens, output_tokens "
    "ON model_usage BEGIN "
    f"UPDATE daily_counts SET count = count - (old.input_tokens + old.output_tokens) "
    f"WHERE day = old.day AND name = '{TOKENS}'; "
    "INSERT INTO daily_counts (day, name, count) "
    f"VALUES (new.day, '{TOKENS}', new.input_tokens + new.output_tokens) "
    "ON CONFLICT (day, name) DO UPDATE SET count = count + excluded.count; END",
    "CREATE TRIGGER IF NOT EXISTS model_usage_tokens_ad AFTER DELETE ON model_usage BEGIN "
    f"UPDATE daily_counts SET count = count - (old.input_tokens + old.output_tokens) "
    f"WHERE day = old.day AND name = '{TOKENS}'; END",
]

SQLITE_DROP = [
    "DROP TRIGGER IF EXISTS model_usage_tokens_ai",
    "DROP TRIGGER IF EXISTS model_usage_tokens_au",
    "DROP TRIGGER IF EXISTS model_usage_tokens_ad",
]

# One statement per row change: an update that stays on its day (the usage upsert's usual case) adds
# its difference, anything else takes the old row's tokens off its day and adds the new row's.
POSTGRES = [
    "CREATE OR REPLACE FUNCTION nikita_count_model_tokens() RETURNS trigger LANGUAGE plpgsql AS $$ "
    "DECLARE added bigint := 0; "
    "BEGIN "
    "IF TG_OP = 'UPDATE' AND OLD.day = NEW.day THEN "
    "added := (NEW.input_tokens + NEW.output_tokens) - (OLD.input_tokens + OLD.output_tokens); "
    "ELSE "
    "IF TG_OP <> 'INSERT' THEN "
    "UPDATE daily_counts SET count = count - (OLD.input_tokens + OLD.output_tokens) "
    f"WHERE day = OLD.day AND name = '{TOKENS}'; "
    "END IF; "
    "IF TG_OP <> 'DELETE' THEN added := NEW.input_tokens + NEW.output_tokens; END IF; "
    "END IF; "
    "IF added <> 0 THEN "
    f"INSERT INTO daily_counts (day, name, count) VALUES (NEW.day, '{TOKENS}', added) "
    "ON CONFLICT (day, name) DO UPDATE SET count = daily_counts.count + EXCLUDED.count; "
    "END IF; "
    "RETURN NULL; "
    "END $$",
    "DROP TRIGGER IF EXISTS model_usage_tokens ON model_usage",
    "CREATE TRIGGER model_usage_tokens AFTER INSERT OR UPDATE OR DELETE ON model_usage "
    "FOR EACH ROW EXECUTE FUNCTION nikita_count_model_tokens()",
]

POSTGRES_DROP = [
    "DROP TRIGGER IF EXISTS model_usage_tokens ON model_usage",
    "DROP FUNCTION IF EXISTS nikita_count_model_tokens()",
]

# The counters of the days already metered: the migration's one-off fill, run after the triggers
# exist (on PostgreSQL creating them locks `model_usage` against writers until the migration commits,
# so no write falls between the fill and the triggers).
FILL = [
    f"DELETE FROM daily_counts WHERE name = '{TOKENS}'",
    "INSERT INTO daily_counts (day, name, count) "
    f"SELECT day, '{TOKENS}', sum({_SPENT}) FROM model_usage GROUP BY day",
]


def upgrade_statements(dialect: str) -> list[str]:
    """The triggers that keep the counter, on this dialect."""
    return {"sqlite": SQLITE, "postgresql": POSTGRES}.get(dialect, [])


def downgrade_statements(dialect: str) -> list[str]:
    """Every statement that removes them (the counter rows go too)."""
    drops = {"sqlite": SQLITE_DROP, "postgresql": POSTGRES_DROP}.get(dialect, [])
    return [*drops, f"DELETE FROM daily_counts WHERE name = '{TOKENS}'"]
