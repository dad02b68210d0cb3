"""The timeline Telegram Mini App: a page, its static files and its signed JSON API.

`routes(runtime)` is added to the webhook's web app (`bot/web/app.py`) and served alone by
`python -m bot web` next to a polling bot.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Route

from agent.memory.listing import FLAGS
from bot.runtime import Runtime
from bot.web.miniapp import asset_version, page_routes
from bot.web.timeline.api import TimelineApi
from bot.web.timeline.facts_api import FactsApi
from bot.web.timeline.imports_api import ImportsApi
from bot.web.timeline.page import CONTENT_SECURITY_POLICY, STATIC_DIR, render_page

PAGE_PATH = "/timeline"


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The page at /timeline, its files under /timeline/static, its API under /timeline/api.

    Ids in the paths are plain segments, read by the handlers after sign-in (bot/web/ids.py):
    Starlette's `:int` would call int() on any run of digits before anyone is signed in.
    """
    runtime.settings.require("telegram_bot_token")  # initData is signed with it
    assert runtime.settings.telegram_bot_token is not None
    api = TimelineApi(runtime, bot_token=runtime.settings.telegram_bot_token.get_secret_value())
    facts = FactsApi(runtime)
    imports = ImportsApi(runtime, api)
    html = render_page(persona_name=runtime.settings.persona_name, version=asset_version(STATIC_DIR))
    return [
        *page_routes(PAGE_PATH, html=html, policy=CONTENT_SECURITY_POLICY, static_dir=STATIC_DIR),
        Route("/timeline/api/days", api.endpoint(api.days), methods=["GET"]),
        Route("/timeline/api/days/{day}", api.endpoint(api.day), methods=["GET"]),
        Route("/timeline/api/days/{day}/regenerate", api.endpoint(api.regenerate), methods=["POST"]),
        Route("/timeline/api/search", api.endpoint(api.search), methods=["GET"]),
        Route("/timeline/api/messages/{message_id}", api.endpoint(api.message), methods=["GET"]),
        Route("/timeline/api/summaries/{day_segment_id}", api.endpoint(api.summary), methods=["GET"]),
        Route("/timeline/api/facts", api.endpoint(facts.facts), methods=["GET"]),
        Route("/timeline/api/facts/{fact_id}/forget", api.endpoint(facts.forget), methods=["POST"]),
        Route("/timeline/api/facts/{fact_id}/reword", api.endpoint(facts.reword), methods=["POST"]),
        *(
            Route(f"/timeline/api/facts/{{fact_id}}/{flag}", api.endpoint(facts.flag(flag)), methods=["POST"])
            for flag in FLAGS
        ),
        Route("/timeline/api/imports", api.endpoint(imports.upload), methods=["POST"]),
        Route("/timeline/api/imports/{import_id}", api.endpoint(imports.status), methods=["GET"]),
        Route("/timeline/api/imports/{import_id}/start", api.endpoint(imports.start), methods=["POST"]),
        Route("/timeline/api/imports/{import_id}/cancel", api.endpoint(imports.cancel), methods=["POST"]),
        Route("/timeline/api/group-lines", api.endpoint(api.group_lines), methods=["GET"]),
        Route("/timeline/api/group-lines/forget", api.endpoint(api.forget_group_lines), methods=["POST"]),
    ]
