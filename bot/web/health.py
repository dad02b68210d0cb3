"""GET /healthz: 200 `{"ok": true}` when the database answers, 503 otherwise (never 500)."""

from __future__ import annotations

import logging

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncEngine
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

logger = logging.getLogger(__name__)


def health_route(engine: AsyncEngine) -> Route:
    """The health check of every web app the bot serves (`run` on $PORT, `web`)."""

    async def healthz(request: Request) -> Response:
        try:
            async with engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
        except (SQLAlchemyError, OSError) as exc:
            logger.error("health check: database unreachable", extra={"error": repr(exc)})
            return JSONResponse({"ok": False, "database": "unreachable"}, status_code=503)
        return JSONResponse({"ok": True})

    return Route("/healthz", healthz, methods=["GET"])
