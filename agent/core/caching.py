"""Prompt caching settings for every repeated model call, in one place.

Anthropic caches a prompt prefix at marked breakpoints (at most 4 a request; a prefix below the
model's minimum length is not cached); OpenAI, Gemini and DeepSeek cache identical prefixes on their
own. PydanticAI places the breakpoints: after the static instructions, after the instructions that
append their changes, and (automatic caching) at the end of the conversation, moving with it. The
explicit Anthropic settings take precedence there; other providers read the unified `cache` setting.

`PROMPT_CACHE` sets the lifetime of the instructions' breakpoints: PydanticAI gives them one lifetime
together, so with "1h" the conversation's package is written at the 1-hour price too (2x input instead of
1.25x, once a session) while the bot-wide persona is written once an hour instead of every five
minutes of quiet. The conversation's breakpoint lives 5 minutes where turns come minutes apart (a
private chat: a conversation ends after a pause anyway) and an hour where they come further apart (a busy
group, whose addressed turns come some ten minutes apart): an entry that expires between turns makes
every turn write the whole history again.

With caching on, a conversation's requests carry PydanticAI's framing announcement (what its
`<system>` blocks and notes mean) from the first request on. By default it joins the head of the
system prompt at the first compaction summary or appended memory change, ahead of the persona: that
moves the whole cached prefix, so that request would read nothing from the cache.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from agent.core.settings import Settings
from agent.core.tokens import get_counter

if TYPE_CHECKING:
    # The settings are a TypedDict, a plain dict at run time: the type alone would import the
    # Anthropic SDK (about a second) into processes that never call a model.
    from pydantic_ai.models.anthropic import AnthropicModelSettings

Ttl = Literal["5m", "1h"]

CONVERSATION_TTL: Ttl = "5m"


def cache_settings(
    settings: Settings, *, conversation: bool = True, conversation_ttl: Ttl = CONVERSATION_TTL
) -> AnthropicModelSettings:
    """Model settings that cache the tools and static instructions (and the conversation, unless
    `conversation` is False: a one-off call whose messages are never sent again).

    The conversation's entry lives `conversation_ttl`. Anthropic refuses a 1-hour breakpoint after a
    5-minute one (tools, then system, then messages), so a 1-hour conversation takes the instructions
    to 1 hour too, whatever `PROMPT_CACHE` says (unless it is "off"): with turns minutes apart a
    5-minute entry of theirs would expire between turns and be written again each time anyway.
    """
    if settings.prompt_cache == "off":
        return {}
    ttl = "1h" if conversation and conversation_ttl == "1h" else settings.prompt_cache
    cached: AnthropicModelSettings = {"anthropic_cache_instructions": ttl, "cache": ttl}
    if conversation:
        cached["anthropic_cache"] = conversation_ttl
        cached["framing_announcement"] = "always"
    else:
        cached["cache"] = {"retention": ttl, "messages": False}
    return cached


# The shortest prefix each Anthropic model family caches, from the version on (Anthropic's prompt
# caching rules); a shorter one is not cached even when marked. OpenAI's automatic caching starts at
# 1024 tokens too.
_MINIMUMS = (("haiku", (3, 0), 2048), ("haiku", (4, 5), 4096), ("opus", (4, 5), 4096))
_VERSION = re.compile(r"(opus|sonnet|haiku)-(\d)(?!\d)(?:-(\d)(?!\d))?")


def minimum_prefix(model: str) -> int:
    """The shortest prompt prefix (tokens) that `model` caches."""
    found = _VERSION.search(model)
    if found is None:
        return 1024
    family, version = found[1], (int(found[2]), int(found[3] or 0))
    rows = [tokens for name, since, tokens in _MINIMUMS if name == family and version >= since]
    return rows[-1] if rows else 1024


def static_cache_settings(settings: Settings, model: str, static: str) -> AnthropicModelSettings:
    """Cache settings for a one-off call whose static instructions come first: their breakpoint when
    they reach the model's minimum cacheable length (below it a mark buys nothing), else none."""
    if get_counter().count(static) < minimum_prefix(model):
        return {}
    return cache_settings(settings, conversation=False)
