"""The web app of webhook mode: Telegram's webhook, a health check, and jobs triggered over HTTP.

`POST /tasks/inbox` works the inbox until it is empty, for an external scheduler: on a host that only
gives the process CPU during a request (Cloud Run with request-based billing), a scheduler calling it
every minute makes sure nothing waits in the inbox for long.
"""

from __future__ import annotations

import hmac
import json
import logging
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from telegram.ext import Application

from agent.core.errors import ConfigurationError
from bot.delivery.inbox import parse_update
from bot.errors import JsonInputError, NotAnUpdateError
from bot.runtime import Runtime
from bot.services import services_of
from bot.web import metrics, voice
from bot.web.health import health_route
from bot.web.json_input import loads
from bot.web.serve import web_routes
from db.inbox import InboxRepository

logger = logging.getLogger(__name__)

WEBHOOK_PATH = "/telegram/webhook"
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
# How long `/tasks/inbox` works the inbox: under the usual request timeouts of schedulers and hosts.
DRAIN_SECONDS = 50.0


def _same(given: str | None, expected: str) -> bool:
    # Constant-time comparison: the secret must not leak through response timing.
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def build_web_app(
    application: Application[Any, Any, Any, Any, Any, Any], runtime: Runtime, *, webhook: bool = True
) -> Starlette:
    """Starlette routes: POST /telegram/webhook (unless `webhook=False`), GET /healthz, POST /tasks/{name}."""
    settings = runtime.settings
    secret = settings.webhook_secret.get_secret_value() if settings.webhook_secret else ""
    if webhook and not secret:
        raise ConfigurationError("WEBHOOK_SECRET is not set; webhook mode needs it to reject forged updates")
    tasks_secret = settings.tasks_secret.get_secret_value() if settings.tasks_secret else None
    delivery = services_of(application).delivery

    async def telegram_webhook(request: Request) -> Response:
        if not _same(request.headers.get(SECRET_HEADER), secret):
            return Response("forbidden", status_code=403)
        try:
            incoming = parse_update(loads(await request.body()))
        except (JsonInputError, NotAnUpdateError) as exc:
            logger.warning("malformed webhook body", extra={"error": repr(exc)})
            return Response("bad request", status_code=400)
        # 200 only once the update is committed to the inbox (a dead one too: acknowledged, so that
        # Telegram stops sending it); otherwise Telegram must send it again.
        try:
            await delivery.inbox.receive([incoming])
        except (SQLAlchemyError, OSError) as exc:
            logger.error("webhook update not stored", extra={"error": repr(exc)})
            return Response("try again", status_code=503)
        wait = settings.inbox_webhook_wait_seconds
        # Only a row that is worked gets answered: a stop or a channel post is done on arrival.
        worked = incoming.dead is None and incoming.telegram_user_id is not None
        if wait > 0 and worked and incoming.update_id is not None:
            # CPU only during requests (Cloud Run request-based billing): answer inside the request.
            await delivery.dispatcher.wait_until_answered(incoming.update_id, within=wait)
        return Response(status_code=200)

    def tasks_authorized(request: Request) -> bool:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip() or None
        return tasks_secret is not None and _same(given, tasks_secret)

    async def drain_inbox(request: Request) -> Response:
        if not tasks_authorized(request):
            return Response("forbidden", status_code=403)
        before = delivery.dispatcher.worked
        emptied = await delivery.dispatcher.drain(within=DRAIN_SECONDS)
        async with delivery.inbox.sessions() as session:
            counts = await InboxRepository(session).counts()
        result = {"emptied": emptied, "worked": delivery.dispatcher.worked - before, "rows": counts}
        return JSONResponse({"ok": True, "job": "inbox", "result": result})

    async def run_task(request: Request) -> Response:
        if not tasks_authorized(request):
            return Response("forbidden", status_code=403)
        from jobs.errors import UnknownJobError
        from jobs.registry import run_job

        name = request.path_params["name"]
        try:
            counts = await run_job(name, runtime.jobs)
        except UnknownJobError as exc:
            return JSONResponse({"ok": False, "error": str(exc)}, status_code=404)
        return JSONResponse({"ok": True, "job": name, "result": json.loads(json.dumps(counts, default=str))})

    # Capabilities append their own routes here; `/tasks/{name}` stays last, it matches any task.
    routes: list[BaseRoute] = [
        *([Route(WEBHOOK_PATH, telegram_webhook, methods=["POST"])] if webhook else []),
        health_route(runtime.engine),
        # Before the generic `/tasks/{name}`: the inbox is a task only the web app serves.
        Route("/tasks/inbox", drain_inbox, methods=["POST"]),
        *metrics.routes(settings),
        Route("/tasks/{name}", run_task, methods=["POST"]),
        *voice.routes(runtime),
        *web_routes(runtime),
    ]
    return Starlette(routes=routes)
