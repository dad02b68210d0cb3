"""Sign-in to the Mini Apps (the timeline, the dashboard): Telegram's `initData`, checked on every API call.

Telegram hands the Mini App a query string (`initData`) signed with the bot token: the hex
HMAC-SHA256 of the "data-check-string" (every field but `hash`, sorted, as `key=value` lines)
under the key HMAC-SHA256("WebAppData", bot token). The page sends it back as
`Authorization: tma <initData>`; nothing else signs a user in. A valid signature proves Telegram
issued it for this bot; `auth_date` bounds how long a copied one stays usable.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

from starlette.requests import Request

from bot.errors import IdFormatError, InitDataError
from bot.web import json_input
from bot.web.ids import parse_id

SCHEME = "tma"
# Telegram's clock and ours may differ a little; an auth_date further in the future is refused.
CLOCK_SKEW = timedelta(seconds=60)


@dataclass(frozen=True)
class WebAppUser:
    """The Telegram user the Mini App was opened by."""

    id: int
    first_name: str
    username: str | None
    language_code: str | None


@dataclass(frozen=True)
class InitData:
    """Validated initData."""

    user: WebAppUser
    auth_date: datetime


def secret_key(bot_token: str) -> bytes:
    """The signing key Telegram derives from the bot token."""
    return hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()


def _fields(init_data: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(init_data, keep_blank_values=True, strict_parsing=True)
    except ValueError as exc:
        raise InitDataError("initData is not a query string") from exc
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise InitDataError("initData repeats a field")
    return fields


def validate_init_data(init_data: str, *, bot_token: str, now: datetime, max_age: timedelta) -> InitData:
    """The signed-in user, or InitDataError: bad signature, stale or future auth_date, no user."""
    fields = _fields(init_data)
    given = fields.pop("hash", "")
    check = "\n".join(f"{key}={fields[key]}" for key in sorted(fields))
    expected = hmac.new(secret_key(bot_token), check.encode(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        raise InitDataError("initData is not signed for this bot")
    try:
        auth_date = datetime.fromtimestamp(int(fields["auth_date"]), tz=UTC)
    except (KeyError, ValueError, OverflowError, OSError) as exc:
        raise InitDataError("initData has no valid auth_date") from exc
    if now - auth_date > max_age:
        raise InitDataError("this sign-in is too old; close the page and open it again from the chat")
    if auth_date - now > CLOCK_SKEW:
        raise InitDataError("initData is dated in the future")
    try:
        raw = json_input.loads(fields["user"])
        telegram_id = parse_id(raw["id"], signed=True)
        if telegram_id is None:
            raise IdFormatError("a Telegram id is a signed 64-bit number")
        user = WebAppUser(
            id=telegram_id,
            first_name=str(raw.get("first_name", "")),
            username=raw.get("username"),
            language_code=raw.get("language_code"),
        )
    except (KeyError, ValueError, TypeError) as exc:
        raise InitDataError("initData names no user") from exc
    return InitData(user=user, auth_date=auth_date)


def init_data_from_header(authorization: str | None) -> str:
    """The initData of an `Authorization: tma <initData>` header."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() != SCHEME or not value.strip():
        raise InitDataError("sign in through Telegram: the request carries no initData")
    return value.strip()


def sign_in(request: Request, *, bot_token: str, now: datetime, max_age: timedelta) -> InitData:
    """The validated initData of a request's `Authorization: tma <initData>`; InitDataError otherwise."""
    raw = init_data_from_header(request.headers.get("Authorization"))
    return validate_init_data(raw, bot_token=bot_token, now=now, max_age=max_age)
