"""Estimated cost of metered model use, from the price data PydanticAI ships (genai-prices).

`model_usage` counts tokens per kind of call, not per model, so a kind is priced at the model that
makes those calls now: chat and onboarding at MODEL, compaction, extraction, day summaries and the
graph at SUMMARY_MODEL. Days from before a model change are therefore priced at the new model.
Prices are per token, taken from a small reference call: genai-prices applies long-context tiers
per request, and a day's total is many short requests, never one long one.
"""

from __future__ import annotations

from decimal import Decimal
from functools import cache

from genai_prices import Usage, calc_price

from agent.core.settings import Settings

_REFERENCE = 1000  # tokens: well below any long-context tier
# Kinds of call (agent/core/usage.py UsageKind) made by the chat model; every other kind uses SUMMARY_MODEL.
CHAT_KINDS = frozenset({"chat", "onboarding"})


def model_for(kind: str, settings: Settings) -> str:
    """The PydanticAI model string that makes this kind of call."""
    return settings.model if kind in CHAT_KINDS else settings.summary_model


@cache
def _per_token(model: str) -> tuple[Decimal, Decimal] | None:
    provider, _, name = model.partition(":")
    if not name:
        return None
    reference = _REFERENCE
    try:
        price_in = calc_price(Usage(input_tokens=reference), name, provider_id=provider).total_price
        price_out = calc_price(Usage(output_tokens=reference), name, provider_id=provider).total_price
    except LookupError:
        return None
    return price_in / reference, price_out / reference


def estimate_cost(model: str, input_tokens: int, output_tokens: int) -> Decimal | None:
    """The estimated price in US dollars; None when genai-prices does not know the model."""
    unit = _per_token(model)
    if unit is None:
        return None
    return unit[0] * input_tokens + unit[1] * output_tokens
