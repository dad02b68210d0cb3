"""GET /metrics: the bot's metrics in Prometheus' text format, for whoever scrapes, behind METRICS_SECRET.

Served by the bot process's web app (webhook mode, or polling with PORT) only when METRICS_SECRET is
set: a scraper sends `Authorization: Bearer <METRICS_SECRET>` (Prometheus' `authorization`
setting). The inbox and job gauges are read from the database on each scrape.
"""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from agent.core.observability.setup import prometheus_scrape
from agent.core.settings import Settings

PATH = "/metrics"
# Prometheus' text exposition format, version 0.0.4.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def routes(settings: Settings) -> list[BaseRoute]:
    """The /metrics route when METRICS_SECRET is set, else none."""
    if not settings.prometheus_enabled or settings.metrics_secret is None:
        return []
    secret = settings.metrics_secret.get_secret_value().encode()

    async def metrics(request: Request) -> Response:
        scheme, _, given = request.headers.get("Authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip().encode(), secret):
            return Response("forbidden", status_code=403, headers={"WWW-Authenticate": "Bearer"})
        body = await prometheus_scrape()
        if body is None:  # telemetry was not configured in this process
            return Response("metrics are off", status_code=503)
        return Response(body, media_type=CONTENT_TYPE, headers={"Cache-Control": "no-store"})

    return [Route(PATH, metrics, methods=["GET"])]
