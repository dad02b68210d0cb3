"""`python -m bot web`: the web pages and APIs without the webhook, for polling deployments.

A polling bot (`python -m bot run`) serves no HTTP; this process serves what users open in a
browser (the timeline Mini App) against the same database, on $PORT. It runs no jobs and opens no
knowledge graph (an embedded graph belongs to the bot process). The database must be migrated
already (`python -m bot migrate`, or the bot's own start), as for `python -m bot jobs`.
"""

from __future__ import annotations

import logging
import signal

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute

from agent.graph import NullGraphMemory
from agent.settings import Settings
from bot import timeline
from bot.runtime import Runtime, build_runtime

logger = logging.getLogger(__name__)


def web_routes(runtime: Runtime) -> list[BaseRoute]:
    """Every capability's browser-facing routes (each adds its own here, in one line)."""
    return [*timeline.routes(runtime)]


def build_pages_app(runtime: Runtime) -> Starlette:
    """The Starlette app of `python -m bot web`."""
    return Starlette(routes=web_routes(runtime))


async def serve_pages(settings: Settings) -> None:
    """Serve until SIGTERM/SIGINT (uvicorn handles them)."""
    runtime = await build_runtime(settings, migrate=False, graph=NullGraphMemory())
    try:
        app = build_pages_app(runtime)
        server = uvicorn.Server(uvicorn.Config(app, host="0.0.0.0", port=settings.port, log_config=None))
        # uvicorn stops gracefully on SIGTERM/SIGINT, then raises the signal again for the handler
        # it found; a no-op one lets this process close the runtime and exit 0 instead of dying.
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda number, frame: None)
        logger.info("serving web pages", extra={"port": settings.port})
        await server.serve()
    finally:
        await runtime.close()
