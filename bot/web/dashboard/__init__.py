"""The admin dashboard Mini App: charts over days of the bot's use, cost, cache, speed and backlog.

`routes(runtime)` is added to the bot's web app (`bot/web/app.py`) and to `python -m bot web`. The
page signs in as the timeline does (Telegram's initData, bot/web/auth.py) and shows nothing
but to ADMIN_IDS; the admin's /stats carries a button that opens it.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from bot.runtime import Runtime
from bot.web.dashboard.api import DashboardApi
from bot.web.dashboard.page import CONTENT_SECURITY_POLICY, STATIC_DIR, render_page
from bot.web.miniapp import asset_version, page_routes

PAGE_PATH = "/dashboard"


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The page at /dashboard, its files under /dashboard/static, its data at /dashboard/api/days."""
    runtime.settings.require("telegram_bot_token")  # initData is signed with it
    assert runtime.settings.telegram_bot_token is not None
    api = DashboardApi(runtime, bot_token=runtime.settings.telegram_bot_token.get_secret_value())
    html = render_page(persona_name=runtime.settings.persona_name, version=asset_version(STATIC_DIR))
    return [
        *page_routes(PAGE_PATH, html=html, policy=CONTENT_SECURITY_POLICY, static_dir=STATIC_DIR),
        Route("/dashboard/api/days", api.days, methods=["GET"]),
    ]
