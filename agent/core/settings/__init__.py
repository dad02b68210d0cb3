"""The one place configuration is read: environment variables and `.env`, validated once at start.

`Settings` is every setting of the bot, composed from one group per concern; each group is a
settings class of its own, so a component that reads only one group can ask for just that group.
A setting's attribute is its environment variable in lower case (`CONTEXT_TOTAL_BUDGET` is
`settings.context_total_budget`), and its group is the module named after the concern:

| module | group | what it holds |
| --- | --- | --- |
| general | GeneralSettings | environment, logs, persona, default time zone, conversation gap |
| telegram | TelegramSettings | token, webhook, web port, admins, streaming, the Mini App |
| models | ModelSettings | chat and summary models, their key, timeouts, prompt caching |
| storage | StorageSettings | database, data folder, the storage checks at start |
| context | ContextSettings | token budgets, context tiers, context engine, compaction |
| media | MediaSettings | photos, documents, PDFs, voice notes |
| voice | VoiceSettings | voice calls |
| access | AccessSettings | access list, rate limits, daily token caps |
| delivery | DeliverySettings | the durable inbox, polling, shutdown, retries |
| jobs | JobSettings | post-processing, day summaries, touchpoints, reminders |
| search | SearchSettings | embedder, recall search, chunking |
| graph | GraphSettings | knowledge graph |
| groups | GroupSettings | group chats: joining, pace, limits, recall of one's own words |
| observability | ObservabilitySettings | OpenTelemetry traces and metrics, the Prometheus endpoint |

`.env.example` and docs/configuration.md document each setting. The checks that need the rest of
the product (PERSONA_FILE readable, EMBEDDER a known embedder) run where the runtime is built.
"""

from __future__ import annotations

from pydantic import ValidationError, model_validator
from pydantic_settings.exceptions import SettingsError

from agent.core.errors import ConfigurationError
from agent.core.settings.access import AccessSettings
from agent.core.settings.context import ContextSettings
from agent.core.settings.delivery import DeliverySettings
from agent.core.settings.general import GeneralSettings
from agent.core.settings.graph import GraphSettings
from agent.core.settings.groups import GroupSettings
from agent.core.settings.jobs import JobSettings
from agent.core.settings.media import MediaSettings
from agent.core.settings.models import OFFLINE_MODELS, ModelSettings
from agent.core.settings.observability import ObservabilitySettings
from agent.core.settings.search import SearchSettings
from agent.core.settings.storage import DEFAULT_DATABASE_URL, StorageSettings, normalise_database_url
from agent.core.settings.telegram import DEFAULT_PORT, TelegramSettings
from agent.core.settings.voice import VoiceSettings

__all__ = [
    "DEFAULT_DATABASE_URL",
    "DEFAULT_PORT",
    "OFFLINE_MODELS",
    "AccessSettings",
    "ContextSettings",
    "DeliverySettings",
    "GeneralSettings",
    "GraphSettings",
    "GroupSettings",
    "JobSettings",
    "MediaSettings",
    "ModelSettings",
    "ObservabilitySettings",
    "SearchSettings",
    "Settings",
    "StorageSettings",
    "TelegramSettings",
    "VoiceSettings",
    "load_settings",
    "normalise_database_url",
]


class Settings(
    GeneralSettings,
    TelegramSettings,
    ModelSettings,
    StorageSettings,
    ContextSettings,
    MediaSettings,
    VoiceSettings,
    AccessSettings,
    DeliverySettings,
    JobSettings,
    SearchSettings,
    GraphSettings,
    GroupSettings,
    ObservabilitySettings,
):
    """Every setting of the bot; `.env.example` documents each one."""

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


def load_settings() -> Settings:
    """Build the settings once at an entry point, turning validation errors into one clear message."""
    try:
        return Settings()
    except SettingsError as exc:
        raise ConfigurationError(f"invalid settings: {exc}") from exc
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']).upper()}: {err['msg']}" for err in exc.errors()
        )
        raise ConfigurationError(f"invalid settings: {problems}") from exc
