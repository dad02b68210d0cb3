"""Which Anthropic models are deprecated, by the SDK's own table, and what to tell the operator at start.

The defaults (agent/core/settings/models.py) are the newest Sonnet and Haiku that the anthropic SDK knows
(`anthropic.types.ModelParam`) and does not list in its `DEPRECATED_MODELS`, that PydanticAI knows
(`pydantic_ai.models.known_model_names()`) and that genai-prices has prices for (so /stats can
estimate cost): `claude-sonnet-5-5` and `claude-haiku-5-5`. Both refuse sampling settings, so
`sampling_allowed` tells the summary and compaction calls to leave `temperature` out.
"""

from __future__ import annotations

import re
from datetime import date, datetime

from agent.core.settings import Settings

ANTHROPIC_PREFIX = "anthropic:"
_ORDINAL = re.compile(r"(\d+)(st|nd|rd|th)\b")


def deprecated_models() -> dict[str, str]:
    """The SDK's table: model name -> end-of-life date as Anthropic writes it ("November 30th, 2026")."""
    from anthropic.resources.messages.messages import DEPRECATED_MODELS

    return dict(DEPRECATED_MODELS)


def parse_end_of_life(text: str) -> date | None:
    """ "November 30th, 2026" -> 2026-11-30; None for a form the SDK has not used before."""
    try:
        return datetime.strptime(_ORDINAL.sub(r"\1", text.strip()), "%B %d, %Y").date()
    except ValueError:
        return None


def model_warnings(settings: Settings, today: date, *, table: dict[str, str] | None = None) -> list[str]:
    """One line per configured Anthropic model (MODEL, SUMMARY_MODEL) that is deprecated or retired."""
    deprecated = deprecated_models() if table is None else table
    lines = []
    for setting in ("model", "summary_model"):
        configured: str = getattr(settings, setting)
        name = configured.removeprefix(ANTHROPIC_PREFIX)
        if not configured.startswith(ANTHROPIC_PREFIX) or name not in deprecated:
            continue
        env, fix = setting.upper(), Settings.model_fields[setting].default
        end = parse_end_of_life(deprecated[name])
        if end is None:
            when = f"is deprecated (end of life: {deprecated[name]})"
        elif end <= today:
            when = f"reached end of life on {end.isoformat()} and no longer answers"
        else:
            when = f"is deprecated and reaches end of life on {end.isoformat()}"
        lines.append(f"{env} {configured} {when}: set {env} to {fix}")
    return lines


def sampling_allowed(model_name: str) -> bool:
    """Whether the model takes `temperature` (Anthropic's newest models refuse it with a 400)."""
    if not model_name.startswith(ANTHROPIC_PREFIX):
        return True
    from pydantic_ai.profiles.anthropic import anthropic_model_profile

    profile = anthropic_model_profile(model_name.removeprefix(ANTHROPIC_PREFIX))
    return not (profile is not None and profile.get("anthropic_disallows_sampling_settings", False))
