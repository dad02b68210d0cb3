"""OpenTelemetry for the bot: traces of every turn and job, metrics, and ids for log lines
(docs/observability.md).

`setup.configure(settings)` turns it on at an entry point; until then every function here is a
no-op that costs one attribute read, and nothing of the OpenTelemetry SDK is imported. Only the
OpenTelemetry API (which PydanticAI imports anyway) is used outside `setup.py`.
"""

from __future__ import annotations

from agent.core.observability.instruments import (
    CAP_LIMITS,
    job_done,
    model_use,
    refused,
    touchpoint_sent,
    turn_done,
)
from agent.core.observability.links import link_turns
from agent.core.observability.state import current
from agent.core.observability.tracing import (
    Attributes,
    annotate,
    inbox_span,
    log_ids,
    root_span,
    span,
    span_context,
    tier_span,
    traced_context,
    traceparent,
    tracing,
)

__all__ = [
    "CAP_LIMITS",
    "Attributes",
    "annotate",
    "current",
    "inbox_span",
    "job_done",
    "link_turns",
    "log_ids",
    "model_use",
    "refused",
    "root_span",
    "span",
    "span_context",
    "tier_span",
    "touchpoint_sent",
    "traced_context",
    "traceparent",
    "tracing",
    "turn_done",
]
