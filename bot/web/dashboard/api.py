"""The dashboard's JSON: signed in with Telegram's initData, and only for ADMIN_IDS.

Anyone else gets 403 (a valid sign-in of someone who is not an admin) or 401 (no valid sign-in, or
one older than TIMELINE_WRITE_MAX_AGE_SECONDS);
a database that does not answer is a 503, never a 500.
"""

from __future__ import annotations

import logging
from datetime import timedelta

from sqlalchemy.exc import SQLAlchemyError
from starlette.requests import Request
from starlette.responses import JSONResponse

from agent.reports.dashboard import MAX_DAYS, dashboard
from bot.errors import InitDataError
from bot.runtime import Runtime
from bot.web.auth import SCHEME, sign_in

logger = logging.getLogger(__name__)

_NO_STORE = {"Cache-Control": "no-store"}
DEFAULT_DAYS = 30


def _error(status: int, message: str) -> JSONResponse:
    extra = {"WWW-Authenticate": SCHEME} if status == 401 else {}
    return JSONResponse({"error": message}, status_code=status, headers={**_NO_STORE, **extra})


class DashboardApi:
    """GET /dashboard/api/days?days=N: every chart's series over the last N UTC days (1 to 90)."""

    def __init__(self, runtime: Runtime, *, bot_token: str) -> None:
        self.runtime = runtime
        self.bot_token = bot_token
        self.admins = frozenset(runtime.settings.admin_ids)
        # The bot-wide figures: a sign-in as fresh as a change in the timeline needs.
        self.max_age = timedelta(seconds=runtime.settings.timeline_write_max_age_seconds)

    async def days(self, request: Request) -> JSONResponse:
        """The charts' data, for an admin signed in through Telegram."""
        try:
            signed = sign_in(
                request, bot_token=self.bot_token, now=self.runtime.clock.now(), max_age=self.max_age
            )
        except InitDataError as exc:
            logger.warning("dashboard sign-in refused", extra={"reason": str(exc)})
            return _error(401, str(exc))
        if signed.user.id not in self.admins:
            logger.warning("dashboard refused to a non-admin", extra={"telegram_id": signed.user.id})
            return _error(403, "the dashboard is for the bot's admins (ADMIN_IDS)")
        text = request.query_params.get("days", str(DEFAULT_DAYS))
        if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_DAYS):
            return _error(400, f"days is a whole number from 1 to {MAX_DAYS}")
        try:
            payload = await dashboard(
                self.runtime.sessions, self.runtime.settings, self.runtime.clock.now(), days=int(text)
            )
        except (SQLAlchemyError, OSError) as exc:
            logger.warning("dashboard data unavailable", extra={"error": repr(exc)})
            return _error(503, "the database did not answer; try again in a moment")
        return JSONResponse(payload, headers=_NO_STORE)
