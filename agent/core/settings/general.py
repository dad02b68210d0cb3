"""Settings of the process as a whole: its environment, logs, persona, time zone and conversation gap."""

from __future__ import annotations

from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import field_validator

from agent.core.settings.base import SettingsGroup, aliased


class GeneralSettings(SettingsGroup):
    """ENVIRONMENT, LOG_*, CONVERSATION_TIMEOUT_MINUTES, DEFAULT_TIMEZONE and PERSONA_*."""

    environment: Literal["local", "production", "test"] = "local"
    log_level: str = "INFO"
    # Time and conversations: a pause longer than this ends a conversation (SESSION_TIMEOUT_MINUTES is
    # read as an alias).
    conversation_timeout_minutes: int = aliased(
        "conversation_timeout_minutes", "session_timeout_minutes", default=15
    )
    default_timezone: str = "UTC"
    # The persona's name, in every prompt and bot text (docs/persona.md); messages are embedded as
    # "<speaker>: <text>" (the user's is users.name), and both names are left out of the lexical side
    # of a search.
    persona_name: str = "Nikita"
    # Operations (docs/logging.md, docs/persona.md): LOG_FORMAT=json writes one JSON object per line
    # (Cloud Logging's fields); PERSONA_FILE is a Markdown file that replaces the shipped persona
    # prompt (agent/chat/persona.md), its {persona_name} placeholders filled with PERSONA_NAME.
    log_format: Literal["text", "json"] = "text"
    persona_file: str | None = None

    @field_validator("default_timezone")
    @classmethod
    def _valid_timezone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"DEFAULT_TIMEZONE {value!r} is not an IANA time zone name") from exc
        return value
