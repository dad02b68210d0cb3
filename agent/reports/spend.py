"""Plain-text lines on model use, its prompt-cache share and its estimated cost (for /stats, /user)."""

from __future__ import annotations

from decimal import Decimal

from agent.core.prices import Cost, model_for, row_cost
from agent.core.settings import Settings
from db.models.usage import IMPORT_USAGE
from db.repositories.usage import UsageRow


def apart(rows: list[UsageRow]) -> tuple[list[UsageRow], list[UsageRow]]:
    """The rows of chat and its memory, and those of imports' post-processing (shown apart)."""
    return [r for r in rows if r.kind != IMPORT_USAGE], [r for r in rows if r.kind == IMPORT_USAGE]


def format_usage(rows: list[UsageRow]) -> str:
    """Calls and tokens in total, then per kind: `12 calls, 3400 tokens in (84% from cache) / 560 out
    (chat 10, graph 2)`; the cache share only when something was read from the cache."""
    if not rows:
        return "no model calls"
    calls = sum(r.calls for r in rows)
    tokens_in = sum(r.input_tokens for r in rows)
    tokens_out = sum(r.output_tokens for r in rows)
    read = sum(r.cache_read_tokens for r in rows)
    share = f" ({_percent(read, tokens_in)} from cache)" if read else ""
    kinds = ", ".join(f"{r.kind} {r.calls}" for r in rows)
    return f"{calls} calls, {tokens_in} tokens in{share} / {tokens_out} out ({kinds})"


def format_spend(rows: list[UsageRow], settings: Settings | None) -> list[str]:
    """One line per kind, then all kinds: tokens, the cache's share of the input, and the estimated
    cost at the model making those calls, as billed and had nothing been cached."""
    lines: list[str] = []
    billed = uncached = Decimal(0)
    unknown = False
    for row in rows:
        tokens = _tokens(row.input_tokens, row.output_tokens, row.cache_read_tokens, row.cache_write_tokens)
        model = model_for(row.kind, settings) if settings is not None else None
        cost = row_cost(model, row) if model else None
        if cost is None:
            unknown = True
            lines.append(f"  {row.kind}: {tokens}, price unknown ({model or 'model not given'})")
            continue
        billed += cost.billed
        uncached += cost.uncached
        lines.append(f"  {row.kind}: {tokens}, {_money(cost)} ({model})")
    if rows:
        tokens = _tokens(
            sum(r.input_tokens for r in rows),
            sum(r.output_tokens for r in rows),
            sum(r.cache_read_tokens for r in rows),
            sum(r.cache_write_tokens for r in rows),
        )
        unpriced = " + what is unpriced" if unknown else ""
        lines.append(f"  all kinds: {tokens}, estimated {_money(Cost(billed, uncached))}{unpriced}")
    return lines


def _tokens(tokens_in: int, tokens_out: int, read: int, written: int) -> str:
    """`1.2M in (84% from cache, 3% cache writes), 30k out`; no parenthesis when nothing was cached."""
    cache = []
    if read or written:
        cache.append(f"{_percent(read, tokens_in)} from cache")
    if written:
        cache.append(f"{_percent(written, tokens_in)} cache writes")
    shares = f" ({', '.join(cache)})" if cache else ""
    return f"{_compact(tokens_in)} in{shares}, {_compact(tokens_out)} out"


def _money(cost: Cost) -> str:
    """`~$0.8300 (~$3.7100 uncached)`; the uncached figure only when caching changed the price."""
    if cost.uncached == cost.billed:
        return f"~${cost.billed:.4f}"
    return f"~${cost.billed:.4f} (~${cost.uncached:.4f} uncached)"


def _percent(part: int, whole: int) -> str:
    return f"{round(100 * part / whole)}%" if whole else "0%"


def _compact(count: int) -> str:
    """A token count at a glance: 950, 30k, 1.5k, 1.2M."""
    for size, suffix in ((1_000_000, "M"), (1_000, "k")):
        if count >= size:
            return f"{count / size:.1f}".removesuffix(".0") + suffix
    return str(count)
