"""Place names and zone names to IANA time zones."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from agent.account.timezones import Ambiguous, Choice, city_index, is_valid_timezone, resolve_timezone
from tests.offline import ISOLATIONS, run_offline


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


@pytest.mark.parametrize("text", ["", "hello there", "Qwertyville", "I like music"])
def test_unknown_places_give_none(text: str) -> None:
    assert resolve_timezone(text) is None


def test_every_indexed_zone_is_valid() -> None:
    assert all(is_valid_timezone(zone) for zone in city_index().values())
    assert not is_valid_timezone("Mars/Olympus") and not is_valid_timezone(" UTC")


# Cities of every continent, in their own scripts and spellings (Hanoi: GeoNames files it under
# Asia/Bangkok, the same clock as Asia/Ho_Chi_Minh).
WORLD = [
    ("Kazan", "Europe/Moscow"),
    ("Bandung", "Asia/Jakarta"),
    ("Medellín", "America/Bogota"),
    ("Osaka", "Asia/Tokyo"),
    ("Guadalajara", "America/Mexico_City"),
    ("Curitiba", "America/Sao_Paulo"),
    ("Lyon", "Europe/Paris"),
    ("Chennai", "Asia/Kolkata"),
    ("Hanoi", "Asia/Bangkok"),
    ("Munich", "Europe/Berlin"),
    ("Мюнхен", "Europe/Berlin"),
    ("München", "Europe/Berlin"),
    ("Mexico City", "America/Mexico_City"),
    ("Ciudad de México", "America/Mexico_City"),
    ("Новосибирск", "Asia/Novosibirsk"),
    ("Екатеринбург", "Asia/Yekaterinburg"),
    ("Владивосток", "Asia/Vladivostok"),
    ("Київ", "Europe/Kyiv"),
    ("Алматы", "Asia/Almaty"),
    ("大阪", "Asia/Tokyo"),
    ("北京", "Asia/Shanghai"),
    ("서울", "Asia/Seoul"),
    ("東京", "Asia/Tokyo"),
    ("Zürich", "Europe/Zurich"),
    ("Kraków", "Europe/Warsaw"),
    ("Düsseldorf", "Europe/Berlin"),
    ("Göteborg", "Europe/Stockholm"),
    ("Sevilla", "Europe/Madrid"),
    ("Marseille", "Europe/Paris"),
    ("Porto Alegre", "America/Sao_Paulo"),
    ("Córdoba, Argentina", "America/Argentina/Cordoba"),
    ("Denver", "America/Denver"),
    ("Phoenix", "America/Phoenix"),
    ("Calgary", "America/Edmonton"),
    ("Winnipeg", "America/Winnipeg"),
    ("Perth", "Australia/Perth"),
    ("Brisbane", "Australia/Brisbane"),
    ("Christchurch", "Pacific/Auckland"),
    ("Lagos", "Africa/Lagos"),
    ("Addis Ababa", "Africa/Addis_Ababa"),
    ("Casablanca", "Africa/Casablanca"),
    ("Accra", "Africa/Accra"),
    ("Kinshasa", "Africa/Kinshasa"),
    ("Tehran", "Asia/Tehran"),
    ("Karachi", "Asia/Karachi"),
    ("Dhaka", "Asia/Dhaka"),
    ("Kathmandu", "Asia/Kathmandu"),
    ("Cebu City", "Asia/Manila"),
    ("Honolulu", "Pacific/Honolulu"),
    ("Reykjavík", "Atlantic/Reykjavik"),
]


@pytest.mark.slow
def test_world_cities_in_any_language() -> None:
    # One test, not 50: each lookup reads the gazetteer afresh.
    assert len(WORLD) == 50
    assert {text: resolve_timezone(text) for text, _ in WORLD} == dict(WORLD)


def test_a_name_on_two_clocks_gives_the_choices_and_a_state_picks_one() -> None:
    assert resolve_timezone("Portland") == Ambiguous(
        "Portland",
        (
            Choice("Portland, Oregon, United States", "America/Los_Angeles"),
            Choice("Portland, Maine, United States", "America/New_York"),
        ),
    )
    assert resolve_timezone("Portland, Maine") == "America/New_York"
    assert resolve_timezone("Portland, Oregon, United States") == "America/Los_Angeles"
    assert resolve_timezone("Paris, Texas") == "America/Chicago"


def test_a_city_that_dwarfs_its_namesakes_is_answered() -> None:
    # Kazan, Russia (1.2 M) and Kazan, Turkey (24 k); Vancouver BC and WA keep the same clock.
    assert resolve_timezone("Kazan") == "Europe/Moscow"
    assert resolve_timezone("Guadalajara") == "America/Mexico_City"


_OFFLINE_SCRIPT = textwrap.dedent(
    """
    from agent.account.timezones import resolve_timezone

    zone = resolve_timezone("Мюнхен")
    assert not touched, touched
    print(zone)
    """
)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_gazetteer_works_offline(isolation: str, tmp_path: Path) -> None:
    assert run_offline(_OFFLINE_SCRIPT, isolation, tmp_path).strip() == "Europe/Berlin"
