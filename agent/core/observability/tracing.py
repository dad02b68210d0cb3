"""Spans of our own: a turn's steps, the inbox row around it, the context and its tiers, jobs.

Every helper is a no-op context manager while tracing is off (one attribute read). They use the
OpenTelemetry API only, which PydanticAI imports anyway; the SDK behind it is set up in `setup.py`.
Attributes carry ids, counts, sizes and timings, never message text (`nikita.*` names, so a backend
can filter on them); PydanticAI's own spans carry prompts only with TELEMETRY_INCLUDE_CONTENT.

A span never records a raw exception: OpenTelemetry's default would put the error's text (a database
error's bound values, which can be a person's message) in an `exception` event and the status. A
failed span gets the error's type (`error.type`) and, as its status description, the redacted
description the logs use (agent/core/redaction.py).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from opentelemetry.context import Context
from opentelemetry.trace import (
    INVALID_SPAN,
    Link,
    Span,
    SpanContext,
    Status,
    StatusCode,
    TraceFlags,
    Tracer,
    get_current_span,
    set_span_in_context,
    use_span,
)
from opentelemetry.util.types import AttributeValue

from agent.core.observability.state import current
from agent.core.redaction import MAX_DESCRIPTION, describe_error, without_parameters

Attributes = Mapping[str, AttributeValue]


class _Off:
    """The context manager every helper returns while tracing is off: yields a span that records nothing."""

    __slots__ = ()

    def __enter__(self) -> Span:
        return INVALID_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_OFF = _Off()


def failed(target: Span, exc: BaseException) -> None:
    """Mark a span failed by `exc`: its type and its redacted description, never its raw text."""
    target.set_attribute("error.type", type(exc).__qualname__)
    target.set_status(Status(StatusCode.ERROR, describe_error(exc)[:MAX_DESCRIPTION]))


@contextmanager
def _current(
    tracer: Tracer,
    name: str,
    *,
    context: Context | None = None,
    attributes: Attributes | None = None,
    links: Sequence[Link] = (),
) -> Iterator[Span]:
    """A span current inside the block, marked by `failed` when the block raises."""
    with (
        tracer.start_as_current_span(
            name,
            context=context,
            attributes=attributes,
            links=links,
            record_exception=False,
            set_status_on_exception=False,
        ) as started,
        _failing(started),
    ):
        yield started


@contextmanager
def _failing(target: Span) -> Iterator[None]:
    try:
        yield
    except Exception as exc:  # recorded and raised again: a cancellation is no failure
        failed(target, exc)
        raise


def tracing() -> bool:
    """Whether spans are recorded in this process."""
    return current.tracer is not None


def span(name: str, attributes: Attributes | None = None) -> AbstractContextManager[Span]:
    """A child of the current span (a root when there is none), current inside the block."""
    tracer = current.tracer
    if tracer is None:
        return _OFF
    return _current(tracer, name, attributes=attributes)


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
    return _current(tracer, name, context=Context(), attributes=attributes, links=linked)


@contextmanager
def _inbox(tracer: Tracer, attributes: Attributes, claimed: tuple[int, int] | None) -> Iterator[Span]:
    started = claimed[0] if claimed is not None else None
    root = tracer.start_span("inbox update", context=Context(), attributes=attributes, start_time=started)
    if claimed is not None:
        # The row was claimed before its task started: the claim is drawn at its own times.
        parent = set_span_in_context(root, Context())
        tracer.start_span("inbox claim", context=parent, start_time=claimed[0]).end(end_time=claimed[1])
    with (
        use_span(root, end_on_exit=True, record_exception=False, set_status_on_exception=False) as entered,
        _failing(entered),
    ):
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


@dataclass
class _Collected:
    """A tier's span whose collection is over (at `ended`, time.time_ns()), finished once the context
    is fitted and the tier's tokens are known."""

    span: Span
    ended: int


# The tiers collected in the current context build, by name (None outside a traced build). The
# collectors run as tasks started inside the build, so they see the build's dict.
_TIERS: ContextVar[dict[str, _Collected] | None] = ContextVar("nikita_tiers", default=None)


def tier_span(name: str) -> AbstractContextManager[Span]:
    """A context tier's collection, from its start to its end: a child of the current span (the turn's
    `context`). Inside a traced build the span is finished when the context is fitted, with the
    tier's tokens, at the time its collection ended; elsewhere it ends with the block."""
    tracer = current.tracer
    if tracer is None:
        return _OFF
    collected = _TIERS.get()
    attributes = {"nikita.tier.name": name}
    if collected is None:
        return _current(tracer, f"context tier {name}", attributes=attributes)
    return _tier(tracer, name, attributes, collected)


@contextmanager
def _tier(
    tracer: Tracer, name: str, attributes: Attributes, collected: dict[str, _Collected]
) -> Iterator[Span]:
    started = tracer.start_span(f"context tier {name}", attributes=attributes)
    try:
        with (
            use_span(
                started, end_on_exit=False, record_exception=False, set_status_on_exception=False
            ) as entered,
            _failing(entered),
        ):
            yield entered
    finally:
        collected[name] = _Collected(started, time.time_ns())


def traced_context[**P, R](build: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R]]:
    """Wrap the context builder: a `context` span whose children are the tiers' collections (each a
    span of its own, `tier_span`) and the history's compaction, and the span's traceparent in the
    snapshot the build returns so the jobs that later work on the conversation link back to its turns."""

    @functools.wraps(build)
    async def traced(*args: P.args, **kwargs: P.kwargs) -> R:
        tracer = current.tracer
        if tracer is None:
            return await build(*args, **kwargs)
        collected: dict[str, _Collected] = {}
        token = _TIERS.set(collected)
        try:
            with _current(tracer, "context") as context_span:
                built = await build(*args, **kwargs)
                snapshot = getattr(built, "snapshot", None)
                if isinstance(snapshot, dict):
                    _describe_context(context_span, snapshot, collected)
                    snapshot["trace"] = traceparent(context_span)
                return built
        finally:
            _TIERS.reset(token)
            for left in collected.values():  # collected but not in the snapshot (a briefing not served)
                left.span.end(end_time=left.ended)

    return traced


def _describe_context(parent: Span, snapshot: dict[str, Any], collected: dict[str, _Collected]) -> None:
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
    tiers: dict[str, dict[str, Any]] = snapshot.get("tiers", {})
    for name, tier in tiers.items():
        # A tier not collected in this build (a briefing held from an earlier turn) has no span.
        if (done := collected.pop(name, None)) is None:
            continue
        attributes: dict[str, AttributeValue] = {
            "nikita.tier.tokens": int(tier.get("tokens", 0)),
            "nikita.tier.status": str(tier.get("status", "ok")),
            "nikita.tier.items": int(tier.get("count", 0)),
            "nikita.tier.present": bool(tier.get("present", False)),
        }
        if "loaded" in tier:
            attributes["nikita.tier.loaded"] = int(tier["loaded"])
        if tier.get("error"):
            attributes["nikita.tier.error"] = without_parameters(str(tier["error"]))[:300]
        done.span.set_attributes(attributes)
        done.span.end(end_time=done.ended)
