"""Sign-in by Telegram initData: only what Telegram signed for this bot, recently, gets in."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl, quote, urlencode

import httpx
import pytest
from sqlalchemy import select

from bench.fakes.telegram_webapp import sign_init_data
from bot.errors import InitDataError
from bot.runtime import Runtime
from bot.web.auth import init_data_from_header, validate_init_data
from db.models import DaySegment
from tests.bot.conftest import TOKEN
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, BEN, NOW, Seeded

DAY = timedelta(days=1)
ANA_USER = {"id": ANA, "first_name": "Ana", "username": "ana_cello", "language_code": "pt"}


def _signed(**changes: object) -> str:
    return sign_init_data(TOKEN, user=ANA_USER, auth_date=int(NOW.timestamp()), **changes)  # type: ignore[arg-type]


def _tampered(init_data: str, **fields: str) -> str:
    values = dict(parse_qsl(init_data))
    values.update(fields)
    return urlencode(values, quote_via=quote)


def test_initdata_signed_by_telegram_for_this_bot_is_accepted() -> None:
    signed = validate_init_data(_signed(), bot_token=TOKEN, now=NOW + timedelta(hours=3), max_age=DAY)
    assert (signed.user.id, signed.user.username, signed.user.language_code) == (ANA, "ana_cello", "pt")
    assert signed.auth_date == NOW


@pytest.mark.parametrize(
    ("init_data", "reason"),
    [
        (sign_init_data("999:OTHER", user=ANA_USER, auth_date=int(NOW.timestamp())), "not signed"),
        (_tampered(_signed(), user=json.dumps({**ANA_USER, "id": BEN})), "not signed"),
        (_tampered(_signed(), auth_date=str(int(NOW.timestamp()) + 3600)), "not signed"),
        (_tampered(_signed(), hash="0" * 64), "not signed"),
        ("&".join(p for p in _signed().split("&") if not p.startswith("hash=")), "not signed"),
        (_signed() + "&auth_date=1", "repeats"),
        ("user=%7B%7D&&hash", "not a query string"),
        ("", "not signed"),
    ],
)
def test_forged_or_altered_initdata_is_refused(init_data: str, reason: str) -> None:
    with pytest.raises(InitDataError, match=reason):
        validate_init_data(init_data, bot_token=TOKEN, now=NOW, max_age=DAY)


def test_stale_and_future_initdata_are_refused() -> None:
    validate_init_data(_signed(), bot_token=TOKEN, now=NOW + DAY, max_age=DAY)
    with pytest.raises(InitDataError, match="too old"):
        validate_init_data(_signed(), bot_token=TOKEN, now=NOW + DAY + timedelta(seconds=1), max_age=DAY)
    with pytest.raises(InitDataError, match="future"):
        validate_init_data(_signed(), bot_token=TOKEN, now=NOW - timedelta(minutes=5), max_age=DAY)


def test_initdata_without_a_user_is_refused() -> None:
    fields = {"auth_date": str(int(NOW.timestamp())), "query_id": "q"}
    unsigned = urlencode(fields)
    # Signed properly, just without a user.
    key = hmac.new(b"WebAppData", TOKEN.encode(), hashlib.sha256).digest()
    check = "\n".join(f"{k}={fields[k]}" for k in sorted(fields))
    signed = unsigned + "&hash=" + hmac.new(key, check.encode(), hashlib.sha256).hexdigest()
    with pytest.raises(InitDataError, match="no user"):
        validate_init_data(signed, bot_token=TOKEN, now=NOW, max_age=DAY)


def test_the_header_must_use_the_tma_scheme() -> None:
    assert init_data_from_header("tma a=1&hash=2") == "a=1&hash=2"
    for header in (None, "", "Bearer a=1", "tma ", "tma"):
        with pytest.raises(InitDataError):
            init_data_from_header(header)


CALLS = [
    ("GET", "/timeline/api/days"),
    ("GET", "/timeline/api/days/2026-03-02"),
    ("POST", "/timeline/api/days/2026-03-02/regenerate"),
    ("GET", "/timeline/api/search?q=Elgar&scope=all"),
    ("GET", "/timeline/api/messages/{marta}"),
    ("GET", "/timeline/api/summaries/{monday}"),
]


async def test_every_api_call_refuses_missing_forged_stale_and_altered_initdata(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth, timeline_runtime: Runtime
) -> None:
    good = auth(ANA)["Authorization"].removeprefix("tma ")
    refused = {
        "missing": {},
        "other scheme": {"Authorization": "Bearer " + good},
        "other bot": auth(ANA, token="999:OTHER"),
        "stale": auth(ANA, age=86_400 + 1),
        "ben turned into ana": {
            "Authorization": "tma " + _tampered(auth(BEN)["Authorization"][4:], user=json.dumps({"id": ANA}))
        },
    }
    for method, template in CALLS:
        path = template.format(marta=seeded.messages["marta"], monday=seeded.segments["monday"])
        for name, headers in refused.items():
            response = await client.request(method, path, headers=headers)
            assert response.status_code == 401, (name, path, response.text)
            assert response.headers["www-authenticate"] == "tma"
            assert "Elgar" not in response.text and "Marta" not in response.text
        assert (await client.request(method, path, headers=auth(ANA))).status_code == 200, path
    # Only the last, signed request queued anything.
    async with timeline_runtime.sessions() as session:
        requested = await session.scalar(
            select(DaySegment.regenerate_requested_at).where(DaySegment.id == seeded.segments["monday"])
        )
    assert requested == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
