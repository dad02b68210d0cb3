"""Dates named in a search query ("on 9 November, 2022", "last May", "three weeks ago", "in the past
two weeks", "before 9 May", "since March") as day ranges.

conversation_search boosts messages of the days a query names instead of filtering on them: a
question that names a date still finds the turn when the date is a little off (a message sent
just after midnight, "last week" said loosely). Relative phrases are read against the search's
`now` (the clock, never the wall clock); a month or weekday without a year is its latest past one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

_MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\b\.?"
_DAY = r"(?P<day>\d{1,2})(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_COUNT = r"(?P<count>\d{1,3}|" + "|".join(_NUMBERS) + r")"

# Order matters: the most specific pattern claims its words first.
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.IGNORECASE))
    for kind, pattern in (
        ("iso", r"\b(?P<year>(?:19|20)\d\d)-(?P<month>\d\d)-(?P<day>\d\d)\b"),
        ("day_month", rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?(?:\s+{_YEAR})?"),
        ("month_day", rf"\b{_MONTH}\s+{_DAY}\b(?:,?\s*{_YEAR})?"),
        ("month", rf"\b(?:(?P<prep>last|in|during|since|of)\s+)?{_MONTH}(?:,?\s+{_YEAR})?"),
        ("ago", rf"\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+ago\b"),
        ("last", r"\b(?:last|past|previous)\s+(?P<unit>week|weekend|month|year)\b"),
        ("this", r"\bthis\s+(?P<unit>week|month|year)\b"),
        ("weekday", r"\b(?:last|on|this past)\s+(?P<weekday>" + "|".join(_WEEKDAYS) + r")\b"),
        ("yesterday", r"\b(?:yesterday|the day before yesterday)\b"),
        ("today", r"\b(?:today|tonight|this morning)\b"),
        ("year", rf"\b(?:in\s+){_YEAR}\b"),
        (
            "within",
            rf"\b(?:in|within|over|during)\s+the\s+(?:last|past)\s+{_COUNT}\s+(?P<unit>day|week|month|year)s?\b",
        ),
    )
)
# A phrase right after one of these words names the time before it, or after it; with an offset
# ("two weeks before", "the week after") only that much of it, the named day included (a question
# dated from a session often means the day it was said).
_SIDE = re.compile(
    rf"(?:\b{_COUNT}\s+(?P<unit>day|week|month|year)s?\s+|\b(?P<near>week|weekend|day|"
    + "|".join(_WEEKDAYS)
    + r")\s+)?\b(?P<side>before|until|till|by|prior\s+to|after|since)\s+(?:the\s+)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class DayRange:
    """An inclusive range of calendar days a query names."""

    first: date
    last: date

    def holds(self, day: date) -> bool:
        """True when `day` falls inside the range."""
        return self.first <= day <= self.last


def _month_range(year: int, month: int) -> DayRange:
    following = date(year + month // 12, month % 12 + 1, 1)
    return DayRange(date(year, month, 1), following - timedelta(days=1))


def _latest_month(month: int, today: date, *, strictly_before: bool) -> DayRange:
    """The latest `month` that has begun by today (before this month when `strictly_before`)."""
    year = today.year
    if month > today.month or (strictly_before and month == today.month):
        year -= 1
    return _month_range(year, month)


def _day(year: int | None, month: int, day: int, today: date) -> DayRange | None:
    """A named day (±1 for time zones and a loosely given date); no year = its latest past one."""
    try:
        named = date(year if year is not None else today.year, month, day)
    except ValueError:
        return None
    if year is None and named > today:
        named = named.replace(year=named.year - 1)
    return DayRange(named - timedelta(days=1), named + timedelta(days=1))


def _ago(count: int, unit: str, today: date) -> DayRange:
    """ "N units ago": the day that long ago, widened by the looseness such phrases have."""
    days = {"day": 1, "week": 7, "month": 30, "year": 365}[unit] * count
    slack = {"day": 1, "week": 4, "month": 15, "year": 100}[unit]
    centre = today - timedelta(days=days)
    return DayRange(centre - timedelta(days=slack), centre + timedelta(days=slack))


def _relative(kind: str, unit: str, today: date) -> DayRange:
    if unit in ("week", "weekend"):
        monday = today - timedelta(days=today.weekday())
        start = monday - timedelta(days=7) if kind == "last" else monday
        return DayRange(start, start + timedelta(days=6))
    if unit == "month":
        if kind == "this":
            return _month_range(today.year, today.month)
        previous = today.replace(day=1) - timedelta(days=1)
        return _month_range(previous.year, previous.month)
    year = today.year - (1 if kind == "last" else 0)
    return DayRange(date(year, 1, 1), date(year, 12, 31))


def _weekday(name: str, today: date) -> DayRange:
    """The latest past `name`day (today excluded: "on Friday" asked on a Friday means last week's)."""
    back = (today.weekday() - _WEEKDAYS.index(name.lower())) % 7 or 7
    named = today - timedelta(days=back)
    return DayRange(named, named)


def _count(text: str) -> int:
    return int(text) if text.isdigit() else _NUMBERS[text.lower()]


def _read(kind: str, match: re.Match[str], today: date) -> DayRange | None:
    """The day range of one matched phrase."""
    groups = match.groupdict()
    year = int(groups["year"]) if groups.get("year") else None
    if kind == "iso":
        return _day(year, int(groups["month"]), int(groups["day"]), today)
    if kind in ("day_month", "month_day"):
        return _day(year, _MONTHS[groups["month"].lower()], int(groups["day"]), today)
    if kind == "month":
        month = _MONTHS[groups["month"].lower()]
        if year is not None:
            return _month_range(year, month)
        prep = (groups.get("prep") or "").lower()
        if groups["month"].lower() == "may" and not prep:
            return None  # "may" alone is mostly the verb
        return _latest_month(month, today, strictly_before=prep == "last")
    if kind == "ago":
        return _ago(_count(groups["count"]), groups["unit"].lower(), today)
    if kind in ("last", "this"):
        return _relative(kind, groups["unit"].lower(), today)
    if kind == "weekday":
        return _weekday(groups["weekday"], today)
    if kind == "yesterday":
        back = 2 if "before" in match.group(0).lower() else 1
        named = today - timedelta(days=back)
        return DayRange(named, named)
    if kind == "today":
        return DayRange(today, today)
    if kind == "year" and year is not None:
        return DayRange(date(year, 1, 1), date(year, 12, 31))
    if kind == "within":
        days = {"day": 1, "week": 7, "month": 30, "year": 365}[groups["unit"].lower()] * _count(
            groups["count"]
        )
        return DayRange(today - timedelta(days=days), today)
    return None


def _side(query: str, match: re.Match[str], days: DayRange, today: date) -> DayRange:
    """The range a phrase names, or the time before or after it ("before 9 May", "since March",
    "two weeks before 11 August")."""
    edge = _SIDE.search(query[: match.start()])
    prep = (match.groupdict().get("prep") or "").lower()
    if edge is None:
        return DayRange(days.first, max(today, days.first)) if prep == "since" else days
    after = edge["side"].lower() in ("after", "since")
    if edge["unit"]:
        unit = edge["unit"].lower()
        span = timedelta(days={"day": 1, "week": 7, "month": 30, "year": 365}[unit] * _count(edge["count"]))
        span += timedelta(days={"day": 1, "week": 4, "month": 15, "year": 100}[unit])
    elif edge["near"]:
        span = timedelta(days=1 if edge["near"].lower() == "day" else 7)
    else:
        return DayRange(days.first, max(today, days.first)) if after else DayRange(date.min, days.last)
    return DayRange(days.first, days.last + span) if after else DayRange(days.first - span, days.last)


def named_days(query: str, today: date) -> list[DayRange]:
    """Every day range the query names, in the order they appear (none for most queries)."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, DayRange]] = []
    for kind, pattern in _PATTERNS:
        for match in pattern.finditer(query):
            start, end = match.span()
            if any(start < b and a < end for a, b in taken):
                continue  # part of a more specific phrase already read
            days = _read(kind, match, today)
            if days is not None:
                taken.append((start, end))
                found.append((start, _side(query, match, days, today) if kind != "within" else days))
    return [days for _, days in sorted(found, key=lambda pair: pair[0])]


def describe_day(day: date, today: date) -> str:
    """A day as the model should read it: "Monday, 3 weeks ago" (relative to `today`)."""
    days = (today - day).days
    if days < 0:
        ago = "in the future"
    elif days == 0:
        ago = "today"
    elif days == 1:
        ago = "yesterday"
    elif days < 14:
        ago = f"{days} days ago"
    elif days < 60:
        ago = f"{days // 7} weeks ago"
    elif days < 730:
        ago = f"{days // 30} months ago"
    else:
        ago = f"{days // 365} years ago"
    return f"{day.strftime('%A')}, {ago}"
