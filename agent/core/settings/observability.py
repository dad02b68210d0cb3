"""Settings of observability: OpenTelemetry traces and metrics, the Prometheus endpoint, log correlation.

The `OTEL_*` names are OpenTelemetry's own (the SDK reads its other standard variables, such as
OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER or OTEL_BSP_*, from the environment itself); the
bot reads these here so that one of them in `.env` counts too, and so that nothing of the SDK is
loaded while they are unset (docs/observability.md).
"""

from __future__ import annotations

from typing import Literal

from pydantic import SecretStr

from agent.core.settings.base import SettingsGroup


class ObservabilitySettings(SettingsGroup):
    """OTEL_*, TELEMETRY_INCLUDE_CONTENT, METRICS_SECRET and GOOGLE_CLOUD_PROJECT."""

    # OTLP/HTTP (protobuf): traces go to <endpoint>/v1/traces and metrics to <endpoint>/v1/metrics
    # unless the per-signal endpoints say otherwise. Unset: no traces and no OTLP metrics, at no cost.
    otel_exporter_otlp_endpoint: str | None = None
    otel_exporter_otlp_traces_endpoint: str | None = None
    otel_exporter_otlp_metrics_endpoint: str | None = None
    # "key=value,key2=value2" (URL-encoded values): a backend's API key or Basic authorization.
    otel_exporter_otlp_headers: SecretStr | None = None
    otel_service_name: str = "nikita"
    otel_sdk_disabled: bool = False
    otel_traces_exporter: Literal["otlp", "none"] = "otlp"
    otel_metrics_exporter: Literal["otlp", "none"] = "otlp"
    # Message text, prompts, model output and tool arguments in spans (PydanticAI's include_content):
    # off by default, for privacy.
    telemetry_include_content: bool = False
    # Set: GET /metrics serves the metrics in Prometheus' text format to `Authorization: Bearer <it>`.
    metrics_secret: SecretStr | None = None
    # Cloud Logging links a JSON log line to its trace as projects/<this>/traces/<trace id>.
    google_cloud_project: str | None = None

    @property
    def otlp_traces_url(self) -> str | None:
        """Where spans are sent, or None when traces are off."""
        if self.otel_sdk_disabled or self.otel_traces_exporter == "none":
            return None
        return self.otel_exporter_otlp_traces_endpoint or _signal(self.otel_exporter_otlp_endpoint, "traces")

    @property
    def otlp_metrics_url(self) -> str | None:
        """Where metrics are pushed, or None when OTLP metrics are off."""
        if self.otel_sdk_disabled or self.otel_metrics_exporter == "none":
            return None
        return self.otel_exporter_otlp_metrics_endpoint or _signal(
            self.otel_exporter_otlp_endpoint, "metrics"
        )

    @property
    def prometheus_enabled(self) -> bool:
        """Whether GET /metrics is served."""
        return not self.otel_sdk_disabled and bool(
            self.metrics_secret and self.metrics_secret.get_secret_value()
        )


def _signal(base: str | None, signal: str) -> str | None:
    """The OTLP/HTTP URL of a signal under the base endpoint, as the OpenTelemetry spec builds it."""
    return f"{base.rstrip('/')}/v1/{signal}" if base else None
