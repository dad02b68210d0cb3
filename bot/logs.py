"""Log lines that carry their cause: the structured extras and the error, as text or as JSON.

Code logs with `logger.warning("model call failed", extra={"user_id": 1}, exc_info=exc)`; both
formats print the extras and the error. Text is one line per record (`key=value`, quoted when the
value has spaces) plus the traceback only for ERROR and above, where the fault is unexpected; a
known failure logged as a warning stays one line. JSON is one object per line in the shape Google
Cloud Logging reads (`severity`, `message`, `time`, and inside a traced turn or job its trace and
span), with the traceback always inside it.
"""

from __future__ import annotations

import json
import logging
import sys
import traceback
from datetime import UTC, datetime
from typing import Literal, TextIO

from agent.core.observability import current, log_ids
from agent.core.redaction import describe_error, without_parameters

LogFormat = Literal["text", "json"]

# The attributes every LogRecord has; anything else on a record came from `extra=` (uvicorn's
# `color_message` is the message again with terminal colours).
_RECORD_ATTRIBUTES = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}
# Cloud Logging's severity names, by Python level (custom levels round down to the nearest).
_SEVERITIES = ((logging.CRITICAL, "CRITICAL"), (logging.ERROR, "ERROR"), (logging.WARNING, "WARNING"))
_JSON_RESERVED = frozenset(
    {"severity", "message", "time", "logger", "exception", "error", "trace_id", "span_id"}
)
# Held at WARNING. uvicorn.access would write each request's path, query string and client address.
NOISY_LOGGERS = ("httpx", "httpcore", "apscheduler", "telegram.ext", "uvicorn.access")
_installed: logging.Handler | None = None


def record_extras(record: logging.LogRecord) -> dict[str, object]:
    """The fields a log call passed in `extra=`, in the order given; a text field (an error's str())
    with its bound values hidden, as an exception's are."""
    return {
        key: without_parameters(value) if isinstance(value, str) else value
        for key, value in vars(record).items()
        if key not in _RECORD_ATTRIBUTES
    }


def severity(levelno: int) -> str:
    """Cloud Logging's name for a Python log level."""
    for threshold, name in _SEVERITIES:
        if levelno >= threshold:
            return name
    return "INFO" if levelno >= logging.INFO else "DEBUG"


def trace_fields() -> dict[str, object]:
    """The current span's ids, under the names Cloud Logging links to Cloud Trace
    (`logging.googleapis.com/trace`, `.../spanId`, `.../trace_sampled`) and OpenTelemetry's own
    (`trace_id`, `span_id`, which log drains and most backends read); empty outside a span."""
    if (ids := log_ids()) is None:
        return {}
    trace_id, span_id, sampled = ids
    project = current.cloud_project
    return {
        "logging.googleapis.com/trace": f"projects/{project}/traces/{trace_id}" if project else trace_id,
        "logging.googleapis.com/spanId": span_id,
        "logging.googleapis.com/trace_sampled": sampled,
        "trace_id": trace_id,
        "span_id": span_id,
    }


def _text_value(value: object) -> str:
    text = str(value)
    if not text or any(ch.isspace() or ch in '"=' for ch in text):
        return json.dumps(text, ensure_ascii=False)  # quoted, with newlines and quotes escaped
    return text


def _exception(record: logging.LogRecord) -> BaseException | None:
    info = record.exc_info
    return info[1] if info and info[1] is not None else None


class TextFormatter(logging.Formatter):
    """`time LEVEL logger message key=value ... error="Type: message"`, one line per known failure."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line, followed by its traceback when it is an unexpected error."""
        record.message = record.getMessage()
        record.asctime = self.formatTime(record, self.datefmt)
        line = self.formatMessage(record)
        fields = record_extras(record)
        exc = _exception(record)
        if exc is not None and "error" not in fields:
            fields["error"] = describe_error(exc)
        if (ids := log_ids()) is not None:
            fields["trace_id"], fields["span_id"] = ids[0], ids[1]
        if fields:
            line += " " + " ".join(f"{key}={_text_value(value)}" for key, value in fields.items())
        if exc is not None and record.levelno >= logging.ERROR and record.exc_info:
            line += "\n" + without_parameters(self.formatException(record.exc_info))
        if record.stack_info:
            line += "\n" + self.formatStack(record.stack_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record: severity, message, time (RFC 3339), logger, extras, exception."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as one line of JSON; values JSON cannot hold are written as `str(value)`."""
        created = datetime.fromtimestamp(record.created, UTC)
        payload: dict[str, object] = {
            "severity": severity(record.levelno),
            "message": record.getMessage(),
            "time": created.isoformat(timespec="microseconds").replace("+00:00", "Z"),
            "logger": record.name,
        }
        payload.update(trace_fields())
        for key, value in record_extras(record).items():
            payload[f"extra_{key}" if key in _JSON_RESERVED else key] = _json_value(value)
        exc = _exception(record)
        if exc is not None and record.exc_info:
            trace = "".join(traceback.format_exception(*record.exc_info))
            payload["error"] = describe_error(exc)
            payload["exception"] = {
                "type": type(exc).__name__,
                "message": without_parameters(str(exc)),
                "traceback": without_parameters(trace).rstrip(),
            }
        if record.stack_info:
            payload["stack"] = record.stack_info
        return json.dumps(payload, default=str, ensure_ascii=False, allow_nan=False)


def _json_value(value: object) -> object:
    """The value when JSON can hold it (objects become their str()), else its str()."""
    try:
        json.dumps(value, default=str, allow_nan=False)
    except (ValueError, TypeError):  # NaN, infinity, a circular structure
        return str(value)
    return value


def configure_logging(
    level: str, *, log_format: LogFormat = "text", stream: TextIO | None = None
) -> logging.Handler:
    """Log once, to stderr (or `stream`), in the chosen format; returns the handler it installed."""
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    global _installed
    if _installed is not None:  # configured again (tests, or a second entry point): replace ours
        root.removeHandler(_installed)
    _installed = handler
    root.addHandler(handler)
    root.setLevel(level.upper())
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(logging.WARNING)
    return handler
