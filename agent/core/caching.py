"""Prompt caching settings for every repeated model call, in one place.

Anthropic caches a prompt prefix at marked breakpoints (at most 4 a request; a prefix below the
model's minimum length is not cached); OpenAI, Gemini and DeepSeek cache identical prefixes on their
own. PydanticAI places the breakpoints: after the static instructions, after the instructions that
append their changes, and (automatic caching) at the end of the conversation, moving with it. The
explicit Anthropic settings take precedence there; other providers read the unified `cache` setting.

`PROMPT_CACHE` sets the lifetime of the instructions' breakpoints: PydanticAI gives them one lifetime
together, so with "1h" the session's memory is written at the 1-hour price too (2x input instead of
1.25x, once a session) while the bot-wide persona is written once an hour instead of every five
minutes of quiet. The conversation's breakpoint is always 5 minutes: a session's turns come minutes
apart, and a session ends after a pause anyway.
"""

from __future__ import annotations

from typing import Literal

from pydantic_ai.models.anthropic import AnthropicModelSettings

from agent.core.settings import Settings

CONVERSATION_TTL: Literal["5m"] = "5m"


def cache_settings(settings: Settings, *, conversation: bool = True) -> AnthropicModelSettings:
    """Model settings that cache the tools and static instructions (and the conversation, unless
    `conversation` is False: a one-off call whose messages are never sent again)."""
    if settings.prompt_cache == "off":
        return AnthropicModelSettings()
    ttl = settings.prompt_cache
    cached = AnthropicModelSettings(anthropic_cache_instructions=ttl, cache=ttl)
    if conversation:
        cached["anthropic_cache"] = CONVERSATION_TTL
    else:
        cached["cache"] = {"retention": ttl, "messages": False}
    return cached
