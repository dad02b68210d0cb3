"""Choosing the profile from the one list: the order of the sections, the budget, what never enters."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from itertools import count

from hypothesis import given
from hypothesis import strategies as st

from agent.core.tokens import get_counter
from agent.memory.profile import choose_profile, profile_line, section_of
from db.models import UserFact

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
