"""A fake OpenTelemetry collector: OTLP/HTTP with protobuf bodies (`POST /v1/traces`, `/v1/metrics`).

It speaks the wire protocol an OpenTelemetry SDK exporter sends (opentelemetry-proto's messages,
`Content-Type: application/x-protobuf`, gzip when the exporter compresses) and answers with the
protobuf response the spec names; anything else is a 400 or 415. What it received is decoded with
opentelemetry-proto itself, not by the code under test, and kept as plain records: `spans` (name,
ids, parent, attributes, links, times, events with their attributes, status code and description)
and `points` (metric name, attributes, value). Nothing a span carries is dropped, so a test can look
for text that should not be there anywhere in it (`ReceivedSpan.text`).
"""

from __future__ import annotations

import gzip
import threading
from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from bench.fakes.serving import LocalServer

PROTOBUF = "application/x-protobuf"


@dataclass(frozen=True)
class ReceivedEvent:
    """One span event (an `exception` event among them) with its attributes."""

    name: str
    attributes: dict[str, Any]


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the collector decoded it (ids in lower-case hex, the parent "" for a root)."""

    name: str
    trace_id: str
    span_id: str
    parent_id: str
    attributes: dict[str, Any]
    links: list[tuple[str, str]]
    start_ns: int
    end_ns: int
    scope: str
    service: str
    events: list[ReceivedEvent] = field(default_factory=list)
    # OTLP's status code (0 unset, 1 ok, 2 error) and its description.
    status_code: int = 0
    status_message: str = ""
    # The attributes of each link (in `links`' order), of the resource and of the scope.
    link_attributes: list[dict[str, Any]] = field(default_factory=list)
    resource: dict[str, Any] = field(default_factory=dict)
    scope_attributes: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        """Everything the span carries as text: name, every attribute (its own, its events', its
        links', its resource's and scope's), event names and the status description."""
        parts = [self.name, *map(str, self.attributes.values()), self.status_message]
        for event in self.events:
            parts += [event.name, *map(str, event.attributes.values())]
        for attributes in [*self.link_attributes, self.resource, self.scope_attributes]:
            parts += map(str, attributes.values())
        return " ".join(parts)


@dataclass(frozen=True)
class ReceivedPoint:
    """One metric data point: a counter's or gauge's value, or a histogram's count and sum."""

    name: str
    unit: str
    attributes: dict[str, Any]
    value: float
    count: int = 0


def value_of(value: AnyValue) -> Any:
    """An attribute's value as Python (arrays as lists, key-value lists as dicts)."""
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return None if kind is None else getattr(value, kind)


def attributes_of(items: Any) -> dict[str, Any]:
    """OTLP's repeated KeyValue as a dict."""
    pairs: list[KeyValue] = list(items)
    return {item.key: value_of(item.value) for item in pairs}


def _point(name: str, unit: str, kind: str | None, point: Any) -> ReceivedPoint:
    attributes = attributes_of(point.attributes)
    if kind == "histogram":
        return ReceivedPoint(name, unit, attributes, point.sum, point.count)
    number = point.as_double if point.WhichOneof("value") == "as_double" else point.as_int
    return ReceivedPoint(name, unit, attributes, float(number))


@dataclass
class FakeCollector:
    """A started collector is a context manager; `endpoint` is what OTEL_EXPORTER_OTLP_ENDPOINT takes."""

    spans: list[ReceivedSpan] = field(default_factory=list)
    points: list[ReceivedPoint] = field(default_factory=list)
    requests: int = 0
    endpoint: str = ""
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def __post_init__(self) -> None:
        routes = [
            Route("/v1/traces", self._traces, methods=["POST"]),
            Route("/v1/metrics", self._metrics, methods=["POST"]),
        ]
        self._local = LocalServer(Starlette(routes=routes), "FakeCollector")

    def __enter__(self) -> FakeCollector:
        self.endpoint = self._local.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._local.stop()

    def wait_for_span(self, name: str, *, timeout: float = 10.0) -> ReceivedSpan:
        """The first span called `name`, waiting for an export to bring it."""
        with self.arrived:
            found = self.arrived.wait_for(lambda: self.named(name), timeout=timeout)
        if not found:
            raise TimeoutError(f"no span {name!r} within {timeout} s; got {[s.name for s in self.spans]}")
        return self.named(name)[0]

    def named(self, name: str) -> list[ReceivedSpan]:
        """Every span received with this name."""
        return [s for s in self.spans if s.name == name]

    def trace(self, trace_id: str) -> list[ReceivedSpan]:
        """Every span received of one trace."""
        return [s for s in self.spans if s.trace_id == trace_id]

    async def _body(self, request: Request) -> bytes | Response:
        if request.headers.get("content-type", "").split(";")[0].strip() != PROTOBUF:
            return Response("protobuf only", status_code=415)
        body = await request.body()
        if request.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        return body

    async def _traces(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        message = ExportTraceServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError:
            return Response("not an ExportTraceServiceRequest", status_code=400)
        received = []
        for resource in message.resource_spans:
            described = attributes_of(resource.resource.attributes)
            service = str(described.get("service.name", ""))
            for scope in resource.scope_spans:
                scope_attributes = attributes_of(scope.scope.attributes)
                for span in scope.spans:
                    received.append(
                        ReceivedSpan(
                            name=span.name,
                            trace_id=span.trace_id.hex(),
                            span_id=span.span_id.hex(),
                            parent_id=span.parent_span_id.hex(),
                            attributes=attributes_of(span.attributes),
                            links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            scope=scope.scope.name,
                            service=service,
                            events=[
                                ReceivedEvent(event.name, attributes_of(event.attributes))
                                for event in span.events
                            ],
                            status_code=span.status.code,
                            status_message=span.status.message,
                            link_attributes=[attributes_of(link.attributes) for link in span.links],
                            resource=described,
                            scope_attributes=scope_attributes,
                        )
                    )
        with self.arrived:
            self.requests += 1
            self.spans.extend(received)
            self.arrived.notify_all()
        return Response(ExportTraceServiceResponse().SerializeToString(), media_type=PROTOBUF)

    async def _metrics(self, request: Request) -> Response:
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        message = ExportMetricsServiceRequest()
        try:
            message.ParseFromString(body)
        except DecodeError:
            return Response("not an ExportMetricsServiceRequest", status_code=400)
        received = []
        for resource in message.resource_metrics:
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    kind = metric.WhichOneof("data")
                    data = getattr(metric, kind) if kind else None
                    for point in getattr(data, "data_points", ()):
                        received.append(_point(metric.name, metric.unit, kind, point))
        with self.arrived:
            self.requests += 1
            self.points.extend(received)
            self.arrived.notify_all()
        return Response(ExportMetricsServiceResponse().SerializeToString(), media_type=PROTOBUF)
