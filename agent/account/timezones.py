"""Turning what people type ("Lisbon", "Мюнхен", "Portland, Maine", "Europe/Berlin") into an IANA time zone.

Zone names, a few nicknames and countries, and the cities that name a zone are answered at once;
any other city comes from the offline gazetteer (`agent.account.gazetteer`), in any of its names.
A name shared by cities on different clocks is answered with the choices unless one city clearly
dominates: `DOMINANCE` times the population of the biggest namesake on another clock.
"""

from __future__ import annotations

import asyncio
import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from agent.account.gazetteer import City, find_cities

DOMINANCE = 10  # London (8.9 M) over London, Ontario (0.4 M); not Portland, Oregon over Portland, Maine
MAX_CHOICES = 5
# Instants through a year, to tell whether two zone names keep the same clock (Vancouver, Seattle).
_SAMPLES = tuple(datetime(2026, month, day, 12, tzinfo=UTC) for month in range(1, 13) for day in (1, 15))

# Places people name that are not the last part of a zone name, and single-zone countries.
ALIASES: dict[str, str] = {
    "san francisco": "America/Los_Angeles",
    "sf": "America/Los_Angeles",
    "seattle": "America/Los_Angeles",
    "nyc": "America/New_York",
    "boston": "America/New_York",
    "washington": "America/New_York",
    "miami": "America/New_York",
    "atlanta": "America/New_York",
    "austin": "America/Chicago",
    "dallas": "America/Chicago",
    "houston": "America/Chicago",
    "montreal": "America/Toronto",
    "bangalore": "Asia/Kolkata",
    "bengaluru": "Asia/Kolkata",
    "mumbai": "Asia/Kolkata",
    "delhi": "Asia/Kolkata",
    "new delhi": "Asia/Kolkata",
    "india": "Asia/Kolkata",
    "beijing": "Asia/Shanghai",
    "china": "Asia/Shanghai",
    "japan": "Asia/Tokyo",
    "korea": "Asia/Seoul",
    "south korea": "Asia/Seoul",
    "germany": "Europe/Berlin",
    "munich": "Europe/Berlin",
    "france": "Europe/Paris",
    "italy": "Europe/Rome",
    "milan": "Europe/Rome",
    "spain": "Europe/Madrid",
    "barcelona": "Europe/Madrid",
    "uk": "Europe/London",
    "england": "Europe/London",
    "united kingdom": "Europe/London",
    "manchester": "Europe/London",
    "edinburgh": "Europe/London",
    "ireland": "Europe/Dublin",
    "netherlands": "Europe/Amsterdam",
    "poland": "Europe/Warsaw",
    "krakow": "Europe/Warsaw",
    "ukraine": "Europe/Kyiv",
    "kiev": "Europe/Kyiv",
    "switzerland": "Europe/Zurich",
    "geneva": "Europe/Zurich",
    "austria": "Europe/Vienna",
    "sweden": "Europe/Stockholm",
    "norway": "Europe/Oslo",
    "denmark": "Europe/Copenhagen",
    "finland": "Europe/Helsinki",
    "greece": "Europe/Athens",
    "turkey": "Europe/Istanbul",
    "israel": "Asia/Jerusalem",
    "tel aviv": "Asia/Jerusalem",
    "uae": "Asia/Dubai",
    "abu dhabi": "Asia/Dubai",
    "singapore": "Asia/Singapore",
    "thailand": "Asia/Bangkok",
    "vietnam": "Asia/Ho_Chi_Minh",
    "philippines": "Asia/Manila",
    "new zealand": "Pacific/Auckland",
    "wellington": "Pacific/Auckland",
    "canberra": "Australia/Sydney",
    "egypt": "Africa/Cairo",
    "nigeria": "Africa/Lagos",
    "kenya": "Africa/Nairobi",
    "south africa": "Africa/Johannesburg",
    "cape town": "Africa/Johannesburg",
    "argentina": "America/Argentina/Buenos_Aires",
    "buenos aires": "America/Argentina/Buenos_Aires",
    "rio": "America/Sao_Paulo",
    "rio de janeiro": "America/Sao_Paulo",
    "colombia": "America/Bogota",
    "peru": "America/Lima",
    "portugal": "Europe/Lisbon",
    "porto": "Europe/Lisbon",
    "utc": "UTC",
    "gmt": "UTC",
}

# Words around a place name in sentences like "I'm in Lisbon" or "I live near Paris, France".
_FILLER = re.compile(
    r"\b(i am|i'm|im|i live|i'm living|living|based|currently|right now|now|at the moment|in|near|from|"
    r"around|the|city of|my timezone is|my time zone is|timezone|time zone|tz|is)\b",
    re.IGNORECASE,
)


def is_valid_timezone(name: str) -> bool:
    """True when `name` is an IANA time zone name known to this system."""
    if not name or name != name.strip():
        return False
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return False
    return True


@cache
def city_index() -> dict[str, str]:
    """City (last path part of every zone, underscores as spaces, lower case) -> zone, plus aliases."""
    index: dict[str, str] = {}
    for zone in sorted(available_timezones()):
        if "/" not in zone or zone.startswith(("Etc/", "SystemV/", "posix/", "right/")):
            continue
        city = zone.rsplit("/", 1)[-1].replace("_", " ").lower()
        # The first (alphabetical) region wins, e.g. "America/..." before legacy "US/..." aliases.
        index.setdefault(city, zone)
    index.update(ALIASES)
    return index


def _fold(text: str) -> str:
    # "São Paulo" and "Sao Paulo" are the same place to the people typing them.
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'"))
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def _candidates(text: str) -> list[str]:
    cleaned = _FILLER.sub(" ", _fold(text)).strip()
    parts = [cleaned, *re.split(r"[,;/()]| - ", cleaned)]
    seen: list[str] = []
    for part in parts:
        words = re.sub(r"[^\w\s'-]", " ", part).split()
        phrase = " ".join(words).lower()
        if phrase and phrase not in seen:
            seen.append(phrase)
    return seen


@dataclass(frozen=True)
class Choice:
    """One of several places a name may mean: how to say it and the zone it is in."""

    label: str  # "Portland, Maine, United States"
    zone: str


@dataclass(frozen=True)
class Ambiguous:
    """A name that means places on different clocks; the person picks one."""

    name: str
    choices: tuple[Choice, ...]


def resolve_timezone(text: str) -> str | Ambiguous | None:
    """The IANA zone that `text` names, the choices when it names several clocks, or None."""
    quick = _known_zone(text)
    if quick is not None:
        return quick
    match = find_cities(text)
    if match is None:
        return _indexed_run(text)
    pointed = _pointed_at(match.cities, match.rest)
    if match.rest and not pointed and not any(city.by_main_name for city in match.cities):
        # "like" in "I like music" is another name of some town: a part of a sentence must be a
        # city's own name, or come with words (country, state) that point at one of them.
        return _indexed_run(text)
    return _decide(match.cities[0].name, pointed or match.cities)


async def lookup_timezone(text: str) -> str | Ambiguous | None:
    """`resolve_timezone` in a worker thread: a gazetteer lookup reads a file and takes a second."""
    return await asyncio.to_thread(resolve_timezone, text)


def _pointed_at(cities: tuple[City, ...], rest: tuple[str, ...]) -> tuple[City, ...]:
    """The cities that the other words ("Maine", "USA", "Spain", "Chicago") point at."""
    phrases = {" ".join(rest[i:j]) for i in range(len(rest)) for j in range(i + 1, len(rest) + 1)}
    # The cities that the most of them point at: "Oregon, United States" is not Portland, Maine.
    hits = [len(city.qualifiers & phrases) for city in cities]
    best = max(hits, default=0)
    return tuple(city for city, hit in zip(cities, hits, strict=True) if hit and hit == best)


def _clock(zone: str) -> tuple[float, ...]:
    info = ZoneInfo(zone)
    return tuple((moment.astimezone(info).utcoffset() or timedelta()).total_seconds() for moment in _SAMPLES)


def _decide(name: str, cities: tuple[City, ...]) -> str | Ambiguous:
    """One zone when the cities share a clock or one dominates; otherwise the choices."""
    by_clock: dict[tuple[float, ...], City] = {}
    for city in cities:  # main-name matches first, then by population: the first of a clock leads it
        if is_valid_timezone(city.zone):
            by_clock.setdefault(_clock(city.zone), city)
    leaders = sorted(by_clock.values(), key=lambda city: city.population, reverse=True)
    if len(leaders) == 1 or leaders[0].population >= DOMINANCE * leaders[1].population:
        return leaders[0].zone
    top = leaders[0].population
    shown = [city for city in leaders if city.population * DOMINANCE >= top][:MAX_CHOICES]
    return Ambiguous(name, tuple(Choice(city.label, city.zone) for city in shown))


def _known_zone(text: str) -> str | None:
    """A zone name, a nickname or country, or a whole phrase that is a zone's city; no gazetteer."""
    stripped = text.strip()
    # Canonical names before legacy links ("Portugal" is a valid zone but means Europe/Lisbon).
    if stripped.lower() in ALIASES:
        return ALIASES[stripped.lower()]
    if is_valid_timezone(stripped):
        return stripped
    # A zone name inside a sentence: "my zone is Europe/Lisbon".
    for token in re.findall(r"[A-Za-z_]+(?:/[A-Za-z_+\-0-9]+)+", stripped):
        if is_valid_timezone(token):
            return str(token)
    # The whole phrase, only: "Paris" is Europe/Paris at once, "Paris, Texas" is for the gazetteer.
    phrases = _candidates(stripped)
    return city_index().get(phrases[0]) if phrases else None


def _indexed_run(text: str) -> str | None:
    """The zone of a run of words that names a zone's city or a country ("new york" in "new york city")."""
    index = city_index()
    for phrase in _candidates(text.strip()):
        if phrase in index:
            return index[phrase]
        words = phrase.split()
        # The longest run of words that names a place ("new york" in "new york city").
        for size in range(min(len(words), 4), 0, -1):
            for start in range(len(words) - size + 1):
                run = " ".join(words[start : start + size])
                if run in index:
                    return index[run]
    return None
