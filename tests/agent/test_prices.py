"""The cost estimate prices cache reads and writes at genai-prices' cache prices, and as if uncached."""

from __future__ import annotations

from decimal import Decimal

from genai_prices import Usage, calc_price

from agent.core.prices import estimate_cost

MODEL = "anthropic:claude-sonnet-4-5"


def _price(**usage: int) -> Decimal:
    return calc_price(Usage(**usage), "claude-sonnet-4-5", provider_id="anthropic").total_price


def test_cached_input_is_priced_as_billed_and_as_if_uncached() -> None:
    day = {"input_tokens": 12_000, "output_tokens": 300}
    cache = {"cache_read_tokens": 9_000, "cache_write_tokens": 2_000, "cache_write_1h_tokens": 500}
    cost = estimate_cost(MODEL, day["input_tokens"], day["output_tokens"], **cache)
    assert cost is not None
    # What genai-prices charges for the same request, and for it with nothing cached.
    assert cost.billed == _price(**day, **cache)
    assert cost.uncached == _price(**day)
    assert cost.billed < cost.uncached

    read = estimate_cost(MODEL, 1000, 0, cache_read_tokens=1000)
    fresh = estimate_cost(MODEL, 1000, 0)
    written = estimate_cost(MODEL, 1000, 0, cache_write_tokens=1000)
    written_1h = estimate_cost(MODEL, 1000, 0, cache_write_tokens=1000, cache_write_1h_tokens=1000)
    assert read and fresh and written and written_1h
    assert read.billed < fresh.billed < written.billed < written_1h.billed
    assert read.uncached == fresh.billed == fresh.uncached == written_1h.uncached

    assert estimate_cost("anthropic:no-such-model", 1000, 10) is None
