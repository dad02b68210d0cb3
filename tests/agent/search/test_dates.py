"""Dates named in search queries, read against the searcher's today."""

from __future__ import annotations

from datetime import date, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.search.dates import DayRange, describe_day, named_days

TODAY = date(2023, 12, 20)  # a Wednesday


def one(query: str) -> DayRange:
    found = named_days(query, TODAY)
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize(
    ("query", "first", "last"),
    [
        ("What dish did Nate make on 9 November, 2022?", date(2022, 11, 8), date(2022, 11, 10)),
        ("which book on 8th December, 2023", date(2023, 12, 7), date(2023, 12, 9)),
        ("the team he signed with on May 21, 2023", date(2023, 5, 20), date(2023, 5, 22)),
        ("notes from 2023-03-04", date(2023, 3, 3), date(2023, 3, 5)),
        ("what was Tim learning in December 2023", date(2023, 12, 1), date(2023, 12, 31)),
        ("what did we talk about last May", date(2023, 5, 1), date(2023, 5, 31)),
        ("the deal he got in December", date(2023, 12, 1), date(2023, 12, 31)),
        ("the trip in June", date(2023, 6, 1), date(2023, 6, 30)),  # latest June already begun
        ("last December", date(2022, 12, 1), date(2022, 12, 31)),  # "last" skips the current month
        ("what happened in 2022", date(2022, 1, 1), date(2022, 12, 31)),
        ("what did I say yesterday", date(2023, 12, 19), date(2023, 12, 19)),
        ("last week's plans", date(2023, 12, 11), date(2023, 12, 17)),
        ("last month", date(2023, 11, 1), date(2023, 11, 30)),
        ("on Friday", date(2023, 12, 15), date(2023, 12, 15)),
        ("three weeks ago", date(2023, 11, 25), date(2023, 12, 3)),
        ("2 days ago", date(2023, 12, 17), date(2023, 12, 19)),
        ("what did I plan in the past two weeks", date(2023, 12, 6), date(2023, 12, 20)),
        ("within the last 3 months", date(2023, 9, 21), date(2023, 12, 20)),
        ("what did I say before 9 May", date.min, date(2023, 5, 10)),
        ("the plan I had until last week", date.min, date(2023, 12, 17)),
        ("what changed since March", date(2023, 3, 1), TODAY),
        ("how did it go after the 5th of December", date(2023, 12, 4), TODAY),
        # An offset names only that much of the time, the named day included.
        ("the puppy she got two weeks before August 11, 2023", date(2023, 7, 23), date(2023, 8, 12)),
        ("where was Tim in the week before 16 November 2023", date(2023, 11, 8), date(2023, 11, 17)),
        ("the Sunday before October 25, 2022", date(2022, 10, 17), date(2022, 10, 26)),
        ("the day after 3 March", date(2023, 3, 2), date(2023, 3, 5)),
    ],
)
def test_reads_named_days(query: str, first: date, last: date) -> None:
    assert one(query) == DayRange(first, last)


@pytest.mark.parametrize(
    "query", ["I may go to the gym", "When did Caroline go to the support group?", "the Sunday roast", ""]
)
def test_no_date_in_ordinary_queries(query: str) -> None:
    assert named_days(query, TODAY) == []


def test_a_day_without_year_is_its_latest_past_one() -> None:
    assert one("on 25 December") == DayRange(date(2022, 12, 24), date(2022, 12, 26))
    assert one("on 1 December") == DayRange(date(2023, 11, 30), date(2023, 12, 2))


def test_several_dates_in_order_and_an_impossible_day_read_as_its_month() -> None:
    found = named_days("between August 11 and August 15 2023, not on 31 February", TODAY)
    assert [r.first for r in found] == [date(2023, 8, 10), date(2023, 8, 14), date(2023, 2, 1)]


def test_describe_day() -> None:
    assert describe_day(TODAY, TODAY) == "Wednesday, today"
    assert describe_day(TODAY - timedelta(days=1), TODAY) == "Tuesday, yesterday"
    assert describe_day(TODAY - timedelta(days=21), TODAY) == "Wednesday, 3 weeks ago"
    assert describe_day(date(2023, 5, 8), TODAY) == "Monday, 7 months ago"
    assert describe_day(date(2020, 1, 1), TODAY) == "Wednesday, 3 years ago"


@given(st.dates(min_value=date(2000, 3, 1), max_value=date(2090, 1, 1)), st.integers(1, 12))
def test_relative_ranges_never_reach_the_future(today: date, count: int) -> None:
    for unit in ("day", "week", "month", "year"):
        for days in named_days(f"{count} {unit}s ago", today):
            assert days.first <= days.last <= today
    for phrase in ("last week", "last month", "last year", "yesterday", "last May", "on Monday"):
        for days in named_days(phrase, today):
            assert days.first <= days.last < today
