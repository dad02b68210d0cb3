"""Settings of the Telegram surface: token, webhook, web port, admins, streaming and the Mini App."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from agent.core.settings.base import SettingsGroup

DEFAULT_PORT = 8080


class TelegramSettings(SettingsGroup):
    """TELEGRAM_*, WEBHOOK_*, PORT, ADMIN_IDS, TASKS_SECRET, STREAM_*, WEBAPP_URL and TIMELINE_*."""

    # Telegram
    telegram_bot_token: SecretStr | None = None
    telegram_api_base_url: str = "https://api.telegram.org/bot"
    webhook_url: str | None = None
    webhook_secret: SecretStr | None = None
    # The port the platform gives (Cloud Run and Heroku set PORT). Given, `run` serves the web app
    # on it in polling mode too; unset, webhook mode and `web` use DEFAULT_PORT, polling serves none.
    port: int | None = None
    admin_ids: Annotated[list[int], NoDecode] = Field(default_factory=list)
    onboarding_enabled: bool = True
    tasks_secret: SecretStr | None = None
    # Telegram surface: inbox rows (and so turns) the dispatcher works at once across conversations.
    max_concurrent_turns: int = 32
    # Telegram experience: in private chats the reply streams as a draft
    # (sendMessageDraft) at most every STREAM_INTERVAL_SECONDS, then arrives as formatted messages.
    # TELEGRAM_FILE_BASE_URL is where files are downloaded (derived from TELEGRAM_API_BASE_URL when
    # unset).
    stream_replies: bool = True
    stream_interval_seconds: float = Field(default=0.7, ge=0.1)
    # Where drafts are not available (groups; Telegram refusing them) send a preview message and
    # edit it at most every max(STREAM_INTERVAL_SECONDS, 1 s) (groups 3 s); false: no preview there.
    stream_edit_fallback: bool = True
    telegram_file_base_url: str | None = None
    # Timeline Mini App: the page at /timeline (webhook mode's web app, or `python -m bot
    # web`). WEBAPP_URL is its public HTTPS address: /timeline sends a button opening it and the chat
    # menu button points to it. Telegram's signed initData is accepted for
    # TIMELINE_AUTH_MAX_AGE_SECONDS after Telegram issued it to read, for TIMELINE_WRITE_MAX_AGE_SECONDS
    # to change anything (forget, reword, pin, delete group lines, regenerate) and to open the
    # dashboard; "Regenerate summary" is limited per user.
    webapp_url: str | None = None
    timeline_auth_max_age_seconds: int = 86_400
    timeline_write_max_age_seconds: int = Field(default=3_600, ge=60)
    timeline_regenerate_per_minute: int = 2
    timeline_regenerate_per_day: int = 20

    @field_validator("admin_ids", mode="before")
    @classmethod
    def _parse_ids(cls, value: object) -> object:
        if isinstance(value, str):
            return [int(part) for part in value.replace(",", " ").split()]
        if isinstance(value, int):
            return [value]
        return value

    @field_validator("webapp_url")
    @classmethod
    def _https_webapp(cls, value: str | None) -> str | None:
        # Telegram opens Mini Apps only over HTTPS and refuses any other button URL.
        if value is not None and not value.startswith("https://"):
            raise ValueError(f"WEBAPP_URL must be an https:// address, got {value!r}")
        return value

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
