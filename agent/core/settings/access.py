"""Settings of access and spend: who may talk to the bot, how often, and how many tokens a day."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import NoDecode

from agent.core.access_keys import access_key
from agent.core.settings.base import SettingsGroup


class AccessSettings(SettingsGroup):
    """RATE_LIMIT_*, EXPORT_PART_BYTES, ACCESS, ALLOWED_USERS, USER_DAILY_TOKENS and DAILY_TOKENS."""

    rate_limit_per_minute: int = 20
    rate_limit_per_day: int = 500
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
