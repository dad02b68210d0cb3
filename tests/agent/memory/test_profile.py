"""Choosing the profile from the one list: the order of the sections, the budget, what never enters,
and the same choice whether the facts are ranked in Python or read ranked from the database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.tokens import get_counter
from agent.memory.profile import choose_profile, load_profile, profile_line, section_of
from bench.clock import FrozenClock
from db.models import UserFact
from db.repositories.facts import FactRepository
from tests.facts import add_facts
from tests.jobs.conftest import seed_conversation

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
_ids = count(1)


def fact(content: str, **values: object) -> UserFact:
    """A held fact, as the repository reads it."""
    defaults: dict[str, object] = {
        "id": next(_ids),
        "user_id": 1,
        "content": content,
        "source": "extraction",
        "category": None,
        "pinned": False,
        "hidden": False,
        "reinforced": 1,
        "created_at": NOW - timedelta(days=10),
        "last_seen_at": None,
        "valid_until": None,
        "invalidated_at": None,
        "message_ids": [],
        "dedupe_key": content,
    }
    return UserFact(**(defaults | values))


def test_pinned_then_who_they_are_then_people_health_preferences_plans_and_the_rest() -> None:
    facts = [
        fact("Loves green tea", category="preference"),
        fact("Has an interview on Friday", category="plan", valid_until=NOW + timedelta(days=3)),
        fact("Collects old maps"),
        fact("Her sister Ines lives in Porto", category="people"),
        fact("Is allergic to cats", category="health"),
        fact("Works as a nurse", category="identity"),
        fact("Call her Nina, never Ana", pinned=True),
    ]
    chosen = choose_profile(facts, budget_tokens=500, count=get_counter().count, now=NOW)

    assert [section_of(f) for f in chosen.facts] == [
        "pinned",
        "identity",
        "people",
        "health",
        "preference",
        "plan",
        "other",
    ]
    assert chosen.left_out == ()


def test_within_a_section_the_most_reinforced_then_the_most_recent_come_first() -> None:
    facts = [
        fact("Likes jazz", category="preference", last_seen_at=NOW - timedelta(days=1)),
        fact("Likes chess", category="preference", reinforced=4),
        fact("Likes rain", category="preference", last_seen_at=NOW - timedelta(hours=1)),
    ]
    chosen = choose_profile(facts, budget_tokens=500, count=get_counter().count, now=NOW)
    assert [f.content for f in chosen.facts] == ["Likes chess", "Likes rain", "Likes jazz"]


def test_hidden_facts_and_plans_whose_day_has_passed_never_enter() -> None:
    facts = [
        fact("Her father died last spring", hidden=True),
        fact("Has an exam on Monday", category="plan", valid_until=NOW - timedelta(days=1)),
        fact("Lives in Lisbon", category="identity"),
    ]
    chosen = choose_profile(facts, budget_tokens=500, count=get_counter().count, now=NOW)
    assert [f.content for f in chosen.facts] == ["Lives in Lisbon"] and chosen.left_out == ()


@given(
    st.lists(st.text(alphabet="abcdefgh ", min_size=1, max_size=80), min_size=0, max_size=40),
    st.integers(min_value=0, max_value=300),
)
def test_the_budget_holds_and_every_fact_is_either_in_or_left_out(texts: list[str], budget: int) -> None:
    counter = get_counter()
    facts = [fact(text) for text in texts]
    chosen = choose_profile(facts, budget_tokens=budget, count=counter.count, now=NOW)
    assert chosen.tokens <= budget
    assert sum(counter.count(profile_line(f)) + 2 for f in chosen.facts) <= budget
    assert sorted(f.id for f in (*chosen.facts, *chosen.left_out)) == sorted(f.id for f in facts)


# (words, category, pinned, hidden, reinforced, said last this long before now, a plan's date from now)
_VARIED: list[tuple[str, str | None, bool, bool, int, timedelta | None, timedelta | None]] = [
    ("Call her Nina, never Ana", None, True, False, 1, None, None),
    ("Loves opera", "preference", True, False, 3, None, None),
    ("Works as a nurse", "identity", False, False, 1, None, None),
    ("Was born in Braga", None, False, False, 1, None, None),
    ("Her sister Ines lives in Porto", None, False, False, 1, None, None),
    ("Mother is Rosa", "family", False, False, 1, None, None),
    ("Is allergic to cats", None, False, False, 1, None, None),
    ("No talk of politics", "boundaries", False, False, 1, None, None),
    ("Takes insulin daily", "Health", False, False, 2, None, None),
    ("Enjoys long walks", None, False, False, 1, None, None),
    ("Likes jazz", "preference", False, False, 2, timedelta(days=1), None),
    ("Likes chess", "preference", False, False, 2, timedelta(days=1), None),
    ("Likes rain", "preference", False, False, 2, timedelta(hours=2), None),
    ("Likes tea", "preference", False, False, 1, timedelta(hours=1), None),
    ("Has a trip to Rome next month", None, False, False, 1, None, None),
    ("Dentist on Thursday", "plans", False, False, 1, None, timedelta(days=2)),
    ("Exam at nine today", "plan", False, False, 1, None, timedelta(0)),
    ("Interview was yesterday", "plan", False, False, 4, None, -timedelta(days=1)),
    ("Her father died last spring", None, False, True, 5, None, None),
    ("Plays the cello", "other", False, False, 1, None, None),
    ("Collects old maps", None, False, False, 1, None, None),
]


@pytest.mark.both_databases
async def test_the_profile_read_ranked_from_the_database_is_the_one_ranked_in_python(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    owner, _ = await seed_conversation(sessions, start=now - timedelta(days=20), texts=["hi"])
    async with sessions() as session, session.begin():
        facts = FactRepository(session)
        for words, category, _pinned, _hidden, _said, _seen, until in _VARIED:
            plan_day = None if until is None else now + until
            await facts.add_sourced(
                owner, None, [(words, ())], now - timedelta(days=10), source="tool",
                category=category, valid_until=[plan_day],
            )  # fmt: skip
        await add_facts(facts, owner, None, ["Moved to Lisbon"], now + timedelta(hours=1), source="tool")
        for words, _category, pinned, hidden, said, seen, _until in _VARIED:
            await session.execute(
                update(UserFact)
                .where(UserFact.user_id == owner, UserFact.content == words)
                .values(
                    pinned=pinned,
                    hidden=hidden,
                    reinforced=said,
                    last_seen_at=None if seen is None else now - seen,
                )
            )
    counter = get_counter()
    async with sessions() as session:
        held = [f for f in await FactRepository(session).held(owner) if f.created_at <= now]
        everything = choose_profile(held, budget_tokens=10_000, count=counter.count, now=now)
        # Pinned first, then by section; within one, the most said, then the latest said, then the newest.
        assert [f.content for f in everything.facts] == [
            "Loves opera",
            "Call her Nina, never Ana",
            "Was born in Braga",
            "Works as a nurse",
            "Mother is Rosa",
            "Her sister Ines lives in Porto",
            "Takes insulin daily",
            "No talk of politics",
            "Is allergic to cats",
            "Likes rain",
            "Likes chess",
            "Likes jazz",
            "Likes tea",
            "Enjoys long walks",
            "Exam at nine today",
            "Dentist on Thursday",
            "Has a trip to Rome next month",
            "Collects old maps",
            "Plays the cello",
        ]
        costs = [counter.count(line) + 2 for line in everything.lines()]
        for budget in sorted({0, 1, *range(0, sum(costs) + 2, 3), sum(costs)}):
            python = choose_profile(held, budget_tokens=budget, count=counter.count, now=now)
            read = await load_profile(session, owner, anchor=now, budget_tokens=budget, count=counter.count)
            assert [f.id for f in read.facts] == [f.id for f in python.facts], budget
            assert [f.id for f in read.left_out] == [f.id for f in python.left_out], budget
            assert (read.tokens, read.lines()) == (python.tokens, python.lines()), budget
