"""Ids and days in the timeline's paths are range-checked after sign-in: 404 or 400, never a 500."""

from __future__ import annotations

import httpx
import pytest

from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, Seeded

ID_PATHS = ("/timeline/api/messages/{}", "/timeline/api/summaries/{}")


async def test_an_id_too_long_for_int_is_404_and_still_needs_sign_in(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    huge = "9" * 5000  # past Python's 4,300-digit limit on int(str)
    for path in ID_PATHS:
        assert (await client.get(path.format(huge))).status_code == 401
        answer = await client.get(path.format(huge), headers=auth(ANA))
        assert answer.status_code == 404 and answer.json() == {"error": "not found"}


@pytest.mark.both_databases
async def test_an_id_past_64_bits_is_404_on_both_databases(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    for value in (2**63, 2**64 + 1, 10**30, 0):
        for path in ID_PATHS:
            answer = await client.get(path.format(value), headers=auth(ANA))
            assert answer.status_code == 404, (path, value, answer.text)
    # The largest id the databases hold is a plain miss.
    largest = await client.get(ID_PATHS[0].format(2**63 - 1), headers=auth(ANA))
    assert largest.status_code == 404


async def test_an_id_that_is_not_ascii_digits_is_400_after_sign_in(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    for segment in ("²", "١٢", "-5", "+5", "1e3", "abc"):
        for path in ID_PATHS:
            assert (await client.get(path.format(segment))).status_code == 401
            answer = await client.get(path.format(segment), headers=auth(ANA))
            assert answer.status_code == 400, (path, segment, answer.text)


async def test_days_at_the_ends_of_the_calendar_are_404_for_a_user_east_of_utc(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    ana = auth(ANA)  # Europe/Berlin
    for day in ("0001-01-01", "9999-12-31", "1969-12-30"):
        assert (await client.get(f"/timeline/api/days/{day}")).status_code == 401
        answer = await client.get(f"/timeline/api/days/{day}", headers=ana)
        assert answer.status_code == 404, (day, answer.text)
        regenerate = await client.post(f"/timeline/api/days/{day}/regenerate", headers=ana)
        assert regenerate.status_code == 404
        search = await client.get(
            "/timeline/api/search", headers=ana, params={"q": "Porto", "scope": "day", "day": day}
        )
        assert search.status_code == 404
    # The last and first days a user can have still answer.
    for day in ("9999-12-30", "1969-12-31"):
        answer = await client.get(f"/timeline/api/days/{day}", headers=ana)
        assert answer.status_code == 200 and answer.json()["blocks"] == []
    assert (await client.get("/timeline/api/days/２０２６-03-02", headers=ana)).status_code == 400


async def test_a_signed_user_id_past_64_bits_is_refused_at_sign_in(
    client: httpx.AsyncClient, seeded: Seeded, auth: Auth
) -> None:
    for telegram_id in (2**70, -(2**63) - 1):
        answer = await client.get("/timeline/api/days", headers=auth(telegram_id))
        assert answer.status_code == 401 and "no user" in answer.json()["error"]
