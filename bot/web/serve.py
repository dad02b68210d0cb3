"""`python -m bot web`: the web pages and APIs without the webhook, for polling deployments.

A polling bot started without $PORT (`python -m bot run` on a laptop or VM) serves no HTTP; this
process serves what users open in a browser (the timeline Mini App) and GET /healthz against the
same database, on $PORT (8080 when unset). It runs no jobs and opens no
knowledge graph (an embedded graph belongs to the bot process). A database behind the newest
revision is migrated first, as the bot's start does.
"""

from __future__ import annotations

import logging
import signal

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from agent.core.settings import Settings
from agent.graph import NullGraph
from bot.preflight import check_database, listen
from bot.runtime import Runtime, build_runtime
from bot.web import dashboard, timeline
from bot.web.health import health_route
from bot.web.server import server_config
from db.migrate import upgrade_unless_at_head

logger = logging.getLogger(__name__)


def web_routes(runtime: Runtime) -> list[BaseRoute]:
    """Every capability's browser-facing routes (each adds its own here, in one line)."""
    return [*timeline.routes(runtime), *dashboard.routes(runtime)]


def build_pages_app(runtime: Runtime) -> Starlette:
    """The Starlette app of `python -m bot web`: the pages and GET /healthz."""
    return Starlette(routes=[health_route(runtime.engine), *web_routes(runtime)])


async def serve_pages(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT (uvicorn handles them); a database that does not answer stops the start."""
    await check_database(settings)
    await upgrade_unless_at_head(settings.database_url)
    runtime = await build_runtime(settings, migrate=False, graph=NullGraph())
    try:
        with listen(settings.web_port) as listener:
            server = uvicorn.Server(server_config(build_pages_app(runtime)))
            # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again for the handler
            # it found; a no-op one lets this process close the runtime and exit 0 instead of dying.
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda number, frame: None)
            logger.info("serving web pages", extra={"port": settings.web_port})
            await server.serve(sockets=[listener])
    finally:
        await runtime.close()
