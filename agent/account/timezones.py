"""Turning what people type ("Lisbon", "I'm in New York", "Europe/Berlin") into an IANA time zone."""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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


def resolve_timezone(text: str) -> str | None:
    """The IANA zone for a zone name, a city or a country in `text`, or None when nothing matches."""
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
    index = city_index()
    for phrase in _candidates(stripped):
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
