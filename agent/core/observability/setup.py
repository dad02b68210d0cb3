"""Turning telemetry on at an entry point: the OpenTelemetry SDK, its exporters, PydanticAI's instrumentation.

`configure(settings)` is called once per process (`python -m bot ...`). With no OTLP endpoint and no
METRICS_SECRET it returns at once and nothing of the SDK is imported. Otherwise:

- traces: a `TracerProvider` whose batch processor sends spans over OTLP/HTTP (protobuf); the bot's
  spans (tracing.py) and PydanticAI's (`Agent.instrument_all`: the agent run, each model request
  with its GenAI attributes and token usage, each tool call) go through it, prompts and message
  text only with TELEMETRY_INCLUDE_CONTENT;
- metrics: a `MeterProvider` with a periodic OTLP/HTTP reader and/or a Prometheus reader (for GET
  /metrics), the bot's instruments (instruments.py) and the database gauges (sampler.py);
- every warning and error logged is counted by its event (instruments.ErrorCounter).

The providers are the process's own, not OpenTelemetry's globals: a test configures and shuts down
as often as it likes. `shutdown()` flushes what is buffered (a job run from the command line exits
right after).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import Clock
from agent.core.observability import state
from agent.core.observability.catalog import Instruments
from agent.core.observability.instruments import ErrorCounter
from agent.core.observability.sampler import Sampler
from agent.core.settings import Settings

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

logger = logging.getLogger(__name__)
SCOPE = "nikita"
# Seconds between the background reads of the database gauges while they are pushed over OTLP.
SAMPLE_SECONDS = 30.0


@dataclass
class _Configured:
    providers: list[Any]
    errors: ErrorCounter | None
    registry: CollectorRegistry | None
    pushing: bool  # OTLP metrics: the gauges are refreshed in the background for each export


_configured: _Configured | None = None


def configure(settings: Settings) -> bool:
    """Set up traces and metrics as the settings ask; False (and nothing loaded) when they ask none."""
    traces_url, metrics_url = settings.otlp_traces_url, settings.otlp_metrics_url
    if traces_url is None and metrics_url is None and not settings.prometheus_enabled:
        return False
    shutdown()
    from opentelemetry.sdk.resources import Resource

    from agent.core.prices import model_for

    resource = Resource.create({"service.name": settings.otel_service_name, "service.namespace": SCOPE})
    headers = _headers(settings)
    providers: list[Any] = []
    current = state.current
    current.include_content = settings.telemetry_include_content
    current.cloud_project = settings.google_cloud_project
    current.model_for = lambda kind: model_for(kind, settings)
    tracer_provider = None
    if traces_url is not None:
        tracer_provider = _tracer_provider(resource, traces_url, headers)
        providers.append(tracer_provider)
        current.tracer = tracer_provider.get_tracer(SCOPE)
    meter_provider, registry = _meter_provider(resource, metrics_url, headers, settings.prometheus_enabled)
    providers.append(meter_provider)
    meter = meter_provider.get_meter(SCOPE)
    current.instruments = Instruments.create(meter)
    current.sampler = Sampler()
    current.sampler.observe(meter)
    if tracer_provider is not None:
        _instrument_agents(
            tracer_provider, meter_provider, include_content=settings.telemetry_include_content
        )
    errors = ErrorCounter()
    logging.getLogger().addHandler(errors)
    global _configured
    _configured = _Configured(providers, errors, registry, pushing=metrics_url is not None)
    logger.info(
        "telemetry on",
        extra={
            "traces": traces_url or "off",
            "metrics": metrics_url or "off",
            "prometheus": settings.prometheus_enabled,
            "content": settings.telemetry_include_content,
        },
    )
    return True


def shutdown() -> None:
    """Flush and stop whatever `configure` started; telemetry is off afterwards."""
    global _configured
    configured, _configured = _configured, None
    if (sampler := state.current.sampler) is not None:
        sampler.cancel()
    state.current.clear()
    if configured is None:
        return
    from pydantic_ai import Agent

    Agent.instrument_all(False)
    if configured.errors is not None:
        logging.getLogger().removeHandler(configured.errors)
    for provider in configured.providers:
        provider.shutdown()


def start_sampler(sessions: async_sessionmaker[AsyncSession], clock: Clock) -> None:
    """Read the database gauges from this database (in the background while OTLP metrics are pushed)."""
    sampler = state.current.sampler
    if sampler is not None and _configured is not None:
        sampler.start(sessions, clock, interval=SAMPLE_SECONDS if _configured.pushing else None)


async def stop_sampler() -> None:
    """Stop refreshing the database gauges."""
    if (sampler := state.current.sampler) is not None:
        await sampler.stop()


async def prometheus_scrape() -> bytes | None:
    """Fresh gauges, then every metric in Prometheus' text format; None when the endpoint is off."""
    if (sampler := state.current.sampler) is not None:
        await sampler.refresh()
    return prometheus_text()


def prometheus_text() -> bytes | None:
    """The metrics in Prometheus' text format, or None when the endpoint is not configured."""
    if _configured is None or _configured.registry is None:
        return None
    from prometheus_client import generate_latest

    return generate_latest(_configured.registry)


def _headers(settings: Settings) -> dict[str, str]:
    if settings.otel_exporter_otlp_headers is None:
        return {}
    from opentelemetry.util.re import parse_env_headers

    return dict(parse_env_headers(settings.otel_exporter_otlp_headers.get_secret_value(), liberal=True))


def _tracer_provider(resource: Any, url: str, headers: dict[str, str]) -> Any:
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url, headers=headers)))
    return provider


def _meter_provider(
    resource: Any, url: str | None, headers: dict[str, str], prometheus: bool
) -> tuple[Any, CollectorRegistry | None]:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader

    readers: list[MetricReader] = []
    if url is not None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

        # The interval and timeout are the SDK's (OTEL_METRIC_EXPORT_INTERVAL, default 60 s).
        readers.append(PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=url, headers=headers)))
    registry = None
    if prometheus:
        from opentelemetry.exporter.prometheus import PrometheusMetricReader
        from prometheus_client import CollectorRegistry

        # A registry of the process's own: the bot's metrics, nothing a library registered globally.
        registry = CollectorRegistry()
        readers.append(PrometheusMetricReader(registry=registry))
    return MeterProvider(resource=resource, metric_readers=readers), registry


def _instrument_agents(tracer_provider: Any, meter_provider: Any, *, include_content: bool) -> None:
    from pydantic_ai import Agent
    from pydantic_ai.models.instrumented import InstrumentationSettings

    Agent.instrument_all(
        InstrumentationSettings(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            include_content=include_content,
            include_binary_content=False,
        )
    )
