"""Place names and zone names to IANA time zones."""

from __future__ import annotations

import pytest

from agent.account.timezones import city_index, is_valid_timezone, resolve_timezone


@pytest.mark.parametrize(
    ("text", "zone"),
    [
        ("Lisbon", "Europe/Lisbon"),
        ("I'm in Lisbon", "Europe/Lisbon"),
        ("i live in new york city", "America/New_York"),
        ("San Francisco", "America/Los_Angeles"),
        ("Europe/Berlin", "Europe/Berlin"),
        ("my time zone is Asia/Tokyo", "Asia/Tokyo"),
        ("London, UK", "Europe/London"),
        ("Bangalore", "Asia/Kolkata"),
        ("I am from São Paulo", "America/Sao_Paulo"),
        ("sydney australia", "Australia/Sydney"),
        ("Portugal", "Europe/Lisbon"),
    ],
)
def test_resolves_places(text: str, zone: str) -> None:
    assert resolve_timezone(text) == zone


@pytest.mark.parametrize("text", ["", "hello there", "Atlantis", "I like music"])
def test_unknown_places_give_none(text: str) -> None:
    assert resolve_timezone(text) is None


def test_every_indexed_zone_is_valid() -> None:
    assert all(is_valid_timezone(zone) for zone in city_index().values())
    assert not is_valid_timezone("Mars/Olympus") and not is_valid_timezone(" UTC")
