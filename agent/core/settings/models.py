"""Settings of the language models: which, their key, timeouts, output caps and prompt caching."""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr

from agent.core.settings.base import SettingsGroup

# Model strings that need no key and no network: `demo` writes readable memory from the
# conversation (agent/core/demo.py); `test` is PydanticAI's TestModel (schema-shaped placeholders).
OFFLINE_MODELS = ("demo", "test")


class ModelSettings(SettingsGroup):
    """MODEL, SUMMARY_*, ANTHROPIC_API_KEY, MODEL_TIMEOUT_SECONDS, MODEL_MAX_TOKENS and PROMPT_CACHE."""

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
    # after the conversation's package ("1h": the bot-wide persona is written once an hour), or "off" for
    # a provider or gateway that refuses cache_control. The conversation's own breakpoint lives 5 min.
    prompt_cache: Literal["off", "5m", "1h"] = "1h"
