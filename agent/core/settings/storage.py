"""Settings of storage: where the data lives, and the checks at start that keep it."""

from __future__ import annotations

from pydantic import Field, field_validator

from agent.core.settings.base import SettingsGroup

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/nikita.db"


def normalise_database_url(url: str) -> str:
    """Accept the URL forms operators paste (Heroku's `postgres://`) and return the async driver form."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    if url.startswith("postgresql://"):
        url = "postgresql+asyncpg://" + url.removeprefix("postgresql://")
    if url.startswith("sqlite://") and not url.startswith("sqlite+aiosqlite://"):
        url = "sqlite+aiosqlite://" + url.removeprefix("sqlite://")
    return url


class StorageSettings(SettingsGroup):
    """DATABASE_URL, DATA_DIR, STARTUP_CHECK_TIMEOUT_SECONDS, ALLOW_EPHEMERAL_STORAGE, K_SERVICE, DYNO,
    SNAPSHOT_RETENTION_DAYS, HISTORY_RETENTION_DAYS, RETENTION_BATCH_SIZE."""

    # Storage
    database_url: str = DEFAULT_DATABASE_URL
    data_dir: str = "./data"

    # Start-up (bot/preflight.py, bot/hosting.py): each network check at start gives up after this
    # long. Cloud Run sets K_SERVICE and Heroku sets DYNO; their disks are lost at every deploy, so
    # SQLite and the embedded graph are refused there unless ALLOW_EPHEMERAL_STORAGE is true.
    startup_check_timeout_seconds: float = Field(default=10.0, gt=0)
    cloud_run_service: str | None = Field(default=None, alias="K_SERVICE")
    heroku_dyno: str | None = Field(default=None, alias="DYNO")
    allow_ephemeral_storage: bool = False

    # Retention of diagnostic data (jobs/retention.py, docs/operations.md#what-is-kept-how-long): the
    # `retention` job deletes context snapshots older than this (the newest of each conversation and of
    # each person stays) after counting their days into the turn roll-up, and empties the model
    # history (the PydanticAI messages) of conversations post-processed and ended longer ago than
    # HISTORY_RETENTION_DAYS (the transcript keeps every word), in batches of this many rows, each its
    # own short transaction.
    snapshot_retention_days: float = Field(default=30.0, gt=0)
    history_retention_days: float = Field(default=30.0, gt=0)
    retention_batch_size: int = Field(default=500, ge=1, le=10_000)

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        return normalise_database_url(value)
