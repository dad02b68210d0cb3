"""Telegram's side of Mini Apps: the menu button and web_app buttons, and signed initData.

`WebAppApi` is mixed into the fake Bot API (setChatMenuButton, getChatMenuButton, and the check
Telegram makes on every web_app button: an HTTPS URL). `sign_init_data` builds the initData string
Telegram hands a Mini App it opens, signed as Telegram documents it, and `launch_fragment` the URL
fragment Telegram opens the page with.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any
from urllib.parse import quote, urlencode

from bench.fakes.telegram_markup import bad_request

Json = dict[str, Any]


def _check_web_app_url(url: object) -> None:
    if not isinstance(url, str) or not url.startswith("https://"):
        reason = "Only HTTPS links are allowed"
        raise bad_request(f"inline keyboard button Web App URL '{url}' is invalid: {reason}")


def check_web_app_buttons(reply_markup: object) -> None:
    """Refuse a keyboard whose web_app buttons do not point to HTTPS, as Telegram does."""
    if not isinstance(reply_markup, dict):
        return
    for row in reply_markup.get("inline_keyboard", []):
        for button in row:
            if "web_app" in button:
                _check_web_app_url(dict(button["web_app"]).get("url"))


class WebAppApi:
    """The Bot API methods about Mini Apps; `menu_buttons` maps chat id ("" = default) to the button."""

    menu_buttons: dict[str, Json]

    def _init_web_app(self) -> None:
        self.menu_buttons = {}

    async def _api_setChatMenuButton(self, p: Json, files: Any) -> bool:
        button = dict(p.get("menu_button") or {"type": "default"})
        if button.get("type") == "web_app":
            if not button.get("text"):
                raise bad_request("menu button text is empty")
            _check_web_app_url(dict(button.get("web_app") or {}).get("url"))
        self.menu_buttons[str(p.get("chat_id", ""))] = button
        return True

    async def _api_getChatMenuButton(self, p: Json, files: Any) -> Json:
        chat = str(p.get("chat_id", ""))
        return self.menu_buttons.get(chat, self.menu_buttons.get("", {"type": "commands"}))


def sign_init_data(bot_token: str, *, user: Json, auth_date: int, query_id: str = "AAHdF6IQ") -> str:
    """initData as Telegram builds it: the fields, and `hash` = HMAC over the sorted key=value lines."""
    fields = {
        "query_id": query_id,
        "user": json.dumps(user, separators=(",", ":"), ensure_ascii=False),
        "auth_date": str(auth_date),
    }
    check = "\n".join(f"{key}={fields[key]}" for key in sorted(fields))
    key = hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()
    fields["hash"] = hmac.new(key, check.encode(), hashlib.sha256).hexdigest()
    return urlencode(fields, quote_via=quote)


def launch_fragment(init_data: str, *, inside_telegram: bool = False) -> str:
    """The URL fragment a Mini App is opened with (`inside_telegram` adds the platform fields)."""
    fragment = "tgWebAppData=" + quote(init_data, safe="")
    if inside_telegram:
        fragment += "&tgWebAppVersion=8.0&tgWebAppPlatform=tdesktop"
    return fragment
