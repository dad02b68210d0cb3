"""How an admin opens the dashboard: a button under /stats, on the host that serves the timeline."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from telegram import InlineKeyboardButton, InlineKeyboardMarkup, WebAppInfo

from agent.core.settings import Settings

BUTTON_TEXT = "Open the dashboard"
OPEN_TEXT = "Charts over days: people, turns, cost, cache, speed, refusals and job lag."


def dashboard_url(settings: Settings) -> str | None:
    """/dashboard on WEBAPP_URL's host (the same web app serves both), or None when it is not set."""
    if settings.webapp_url is None:
        return None
    scheme, host, *_ = urlsplit(settings.webapp_url)
    return urlunsplit((scheme, host, "/dashboard", "", ""))


def dashboard_button(settings: Settings) -> InlineKeyboardMarkup | None:
    """The web_app button that opens the dashboard, or None without WEBAPP_URL."""
    url = dashboard_url(settings)
    if url is None:
        return None
    return InlineKeyboardMarkup([[InlineKeyboardButton(BUTTON_TEXT, web_app=WebAppInfo(url=url))]])
