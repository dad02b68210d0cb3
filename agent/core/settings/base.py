"""What every group of settings shares: where values come from, and naming a missing one."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from agent.core.errors import ConfigurationError


def aliased(name: str, *aliases: str, **field: Any) -> Any:
    """A field read from its own environment variable or, when that is unset, from an accepted alias."""
    return Field(validation_alias=AliasChoices(name, *aliases), **field)


class SettingsGroup(BaseSettings):
    """One group of settings, read from the environment and `.env` like the whole."""

    # Empty values (as in a copied .env.example) mean "not set", not "set to an empty string".
    model_config = SettingsConfigDict(
        env_file=".env", env_file_encoding="utf-8", extra="ignore", env_ignore_empty=True
    )

    def require(self, *names: str) -> None:
        """Fail at start, naming the setting, when something a command needs is missing."""
        for name in names:
            value = getattr(self, name)
            if value is None or (isinstance(value, SecretStr) and not value.get_secret_value()):
                raise ConfigurationError(f"{name.upper()} is not set; put it in the environment or .env")
