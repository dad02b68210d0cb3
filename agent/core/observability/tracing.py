"""Spans of our own: a turn's steps, the inbox row around it, the context and its tiers, jobs.

Every helper is a no-op context manager while tracing is off (one attribute read). They use the
OpenTelemetry API only, which PydanticAI imports anyway; the SDK behind it is set up in `setup.py`.
Attributes carry ids, counts, sizes and timings, never message text (`nikita.*` names, so a backend
can filter on them); PydanticAI's own spans carry prompts only with TELEMETRY_INCLUDE_CONTENT.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    Span,
    SpanContext,
    TraceFlags,
    Tracer,
    get_current_span,
    set_span_in_context,
    use_span,
)
from opentelemetry.util.types import AttributeValue

from agent.core.observability.state import current

Attributes = Mapping[str, AttributeValue]


class _Off:
    """The context manager every helper returns while tracing is off: yields a span that records nothing."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def tracing() -> bool:
    """Whether spans are recorded in this process."""
    return current.tracer is not None


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
    """A child of the current span (a root when there is none), current inside the block."""
    tracer = current.tracer
    if tracer is None:
        return _OFF
    return tracer.start_as_current_span(name, attributes=attributes)


def annotate(attributes: Attributes, *, name: str | None = None) -> None:
    """Add attributes to the current span (and rename it) once what it works on is known."""
    if current.tracer is None:
        return
    target = get_current_span()
    target.set_attributes(attributes)
    if name is not None:
        target.update_name(name)


def root_span(
    name: str, attributes: Attributes | None = None, *, links: Sequence[str] = ()
) -> AbstractContextManager[Span]:
    """The first span of a trace of its own (a background job's piece of work), linked to the traces
    named by `links` (W3C traceparents, e.g. the turns of the conversation it works on)."""
    tracer = current.tracer
    if tracer is None:
        return _OFF
    linked = [Link(context) for context in map(span_context, links) if context is not None]
    return tracer.start_as_current_span(name, context=Context(), attributes=attributes, links=linked)


@contextmanager
def _inbox(tracer: Tracer, attributes: Attributes, claimed: tuple[int, int] | None) -> Iterator[Span]:
    started = claimed[0] if claimed is not None else None
    root = tracer.start_span("inbox update", context=Context(), attributes=attributes, start_time=started)
    if claimed is not None:
        # The row was claimed before its task started: the claim is drawn at its own times.
        parent = _as_context(root)
        tracer.start_span("inbox claim", context=parent, start_time=claimed[0]).end(end_time=claimed[1])
    with use_span(root, end_on_exit=True) as entered:
        yield entered


def inbox_span(
    update_id: int, attempts: int, claimed: tuple[int, int] | None
) -> AbstractContextManager[Span]:
    """The root of a turn's trace: one inbox row worked, from its claim (`claimed`: the claim's start
    and end in time.time_ns()) to its reply sent."""
    tracer = current.tracer
    if tracer is None:
        return _OFF
    return _inbox(tracer, {"nikita.update.id": update_id, "nikita.update.attempts": attempts}, claimed)


def _as_context(parent: Span) -> Context:
    return set_span_in_context(parent, Context())


def traceparent(target: Span | None = None) -> str | None:
    """The W3C traceparent of a span (the current one by default), or None when it records nothing."""
    context = (target or get_current_span()).get_span_context()
    if not context.is_valid:
        return None
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def span_context(parent: str) -> SpanContext | None:
    """The span a W3C traceparent names (None when it is not one)."""
    parts = parent.split("-")
    if len(parts) != 4 or len(parts[1]) != 32 or len(parts[2]) != 16:
        return None
    try:
        trace_id, span_id, flags = int(parts[1], 16), int(parts[2], 16), int(parts[3], 16)
    except ValueError:
        return None
    context = SpanContext(trace_id, span_id, is_remote=True, trace_flags=TraceFlags(flags))
    return context if context.is_valid else None


def log_ids() -> tuple[str, str, bool] | None:
    """(trace id, span id, sampled) of the current span, for log lines; None outside a recorded span."""
    if current.tracer is None:
        return None
    context = get_current_span().get_span_context()
    if not context.is_valid:
        return None
    return f"{context.trace_id:032x}", f"{context.span_id:016x}", context.trace_flags.sampled


def traced_context[**P, R](build: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap the context builder: a `context` span, one child per tier with its tokens, status and
    time (read from the snapshot the build returns), and the span's traceparent in that snapshot so
    the jobs that later work on the conversation link back to its turns."""

    @functools.wraps(build)
    async def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        tracer = current.tracer
        if tracer is None:
            return await build(*args, **kwargs)
        started = time.time_ns()
        with tracer.start_as_current_span("context") as context_span:
            built = await build(*args, **kwargs)
            snapshot = getattr(built, "snapshot", None)
            if isinstance(snapshot, dict):
                _describe_context(tracer, context_span, snapshot, started)
                snapshot["trace"] = traceparent(context_span)
            return built

    return traced


def _describe_context(tracer: Tracer, parent: Span, snapshot: dict[str, Any], started: int) -> None:
    parent.set_attributes(
        {
            "nikita.context.total_tokens": int(snapshot.get("total_tokens", 0)),
            "nikita.context.instructions_tokens": int(snapshot.get("instructions_tokens", 0)),
            "nikita.context.history_tokens": int(snapshot.get("message_history_tokens", 0)),
            "nikita.context.history_messages": int(snapshot.get("message_history_count", 0)),
            "nikita.context.cuts": len(snapshot.get("cuts", ())),
            "nikita.context.failures": len(snapshot.get("failures", ())),
            "nikita.context.engine": str(snapshot.get("engine", {}).get("served", "v1")),
        }
    )
    context = _as_context(parent)
    tiers: dict[str, dict[str, Any]] = snapshot.get("tiers", {})
    for name, tier in tiers.items():
        attributes: dict[str, AttributeValue] = {
            "nikita.tier.name": name,
            "nikita.tier.tokens": int(tier.get("tokens", 0)),
            "nikita.tier.status": str(tier.get("status", "ok")),
            "nikita.tier.items": int(tier.get("count", 0)),
            "nikita.tier.present": bool(tier.get("present", False)),
        }
        if "loaded" in tier:
            attributes["nikita.tier.loaded"] = int(tier["loaded"])
        if tier.get("error"):
            attributes["nikita.tier.error"] = str(tier["error"])[:300]
        _drawn(tracer, f"context tier {name}", context, attributes, started, tier.get("ms"))
    compaction = snapshot.get("history", {}).get("compaction")
    if isinstance(compaction, dict) and compaction.get("status") not in (None, "not needed"):
        attributes = {
            "nikita.compaction.status": str(compaction["status"]),
            "nikita.compaction.covered_messages": int(compaction.get("covered_messages") or 0),
            "nikita.compaction.summary_tokens": int(compaction.get("summary_tokens") or 0),
        }
        _drawn(tracer, "context compaction", context, attributes, started, compaction.get("ms"))


def _drawn(
    tracer: Tracer, name: str, context: Context, attributes: Attributes, started: int, ms: object
) -> None:
    """A span drawn after the fact from a measured duration (the collectors time themselves)."""
    took = int(float(ms) * 1_000_000) if isinstance(ms, int | float) else 0
    child = tracer.start_span(name, context=context, attributes=attributes, start_time=started)
    child.end(end_time=started + took)


__all__ = [
    "annotate",
    "inbox_span",
    "log_ids",
    "root_span",
    "span",
    "span_context",
    "traced_context",
    "traceparent",
    "tracing",
]
