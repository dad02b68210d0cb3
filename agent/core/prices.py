"""Estimated cost of metered model use, from the price data PydanticAI ships (genai-prices).

`model_usage` counts tokens per kind of call, not per model, so a kind is priced at the model that
makes those calls now: chat and onboarding at MODEL, compaction, extraction, day summaries and the
graph at SUMMARY_MODEL. Days from before a model change are therefore priced at the new model.
Prices are per token, taken from small reference calls: genai-prices applies long-context tiers
per request, and a day's total is many short requests, never one long one.

Cache reads and writes are priced at the model's cache prices, 1-hour writes at their own price.
Where the price data lacks one, genai-prices falls back to the next broader price: a 1-hour write
to the (5-minute) write price, a write or a read to the input price.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from functools import cache

from genai_prices import Usage, calc_price

from agent.core.settings import Settings
from db.repositories.usage import UsageRow

_REFERENCE = 1000  # tokens: well below any long-context tier
# Kinds of call (agent/core/usage.py UsageKind) made by the chat model; every other kind uses SUMMARY_MODEL.
CHAT_KINDS = frozenset({"chat", "onboarding"})


@dataclass(frozen=True)
class Cost:
    """Estimated US dollars of some use: as billed, and had every input token been sent uncached."""

    billed: Decimal
    uncached: Decimal


@dataclass(frozen=True)
class _Prices:
    """Dollars per token of one model."""

    input: Decimal
    output: Decimal
    cache_read: Decimal
    cache_write: Decimal
    cache_write_1h: Decimal


def model_for(kind: str, settings: Settings) -> str:
    """The PydanticAI model string that makes this kind of call."""
    return settings.model if kind in CHAT_KINDS else settings.summary_model


@cache
def _per_token(model: str) -> _Prices | None:
    provider, _, name = model.partition(":")
    if not name:
        return None
    reference = _REFERENCE

    def unit(**usage: int) -> Decimal:
        return calc_price(Usage(**usage), name, provider_id=provider).total_price / reference

    try:
        return _Prices(
            input=unit(input_tokens=reference),
            output=unit(output_tokens=reference),
            # Cached tokens are part of the input tokens, as providers and PydanticAI count them.
            cache_read=unit(input_tokens=reference, cache_read_tokens=reference),
            cache_write=unit(input_tokens=reference, cache_write_tokens=reference),
            cache_write_1h=unit(
                input_tokens=reference, cache_write_tokens=reference, cache_write_1h_tokens=reference
            ),
        )
    except LookupError:
        return None


def estimate_cost(
    model: str,
    input_tokens: int,
    output_tokens: int,
    *,
    cache_read_tokens: int = 0,
    cache_write_tokens: int = 0,
    cache_write_1h_tokens: int = 0,
) -> Cost | None:
    """The estimated price with and without caching; None when genai-prices does not know the model.

    Input tokens include the cache reads and writes; 1-hour writes are part of the writes.
    """
    prices = _per_token(model)
    if prices is None:
        return None
    output = prices.output * output_tokens
    fresh = max(input_tokens - cache_read_tokens - cache_write_tokens, 0)
    short_writes = max(cache_write_tokens - cache_write_1h_tokens, 0)
    billed = (
        prices.input * fresh
        + prices.cache_read * cache_read_tokens
        + prices.cache_write * short_writes
        + prices.cache_write_1h * cache_write_1h_tokens
        + output
    )
    return Cost(billed=billed, uncached=prices.input * input_tokens + output)


def row_cost(model: str, row: UsageRow) -> Cost | None:
    """`estimate_cost` of one row of usage counters at `model`."""
    return estimate_cost(
        model,
        row.input_tokens,
        row.output_tokens,
        cache_read_tokens=row.cache_read_tokens,
        cache_write_tokens=row.cache_write_tokens,
        cache_write_1h_tokens=row.cache_write_1h_tokens,
    )
