"""The consolidation plan: the model's answer checked against what it was shown, pinned facts kept."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from agent.core.demo_tidy import tidy
from agent.memory.consolidation import Tidying, facts_prompt, take_answer
from agent.memory.tidying import Held, Plan, model_free_plan

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def _fact(
    fact_id: int, content: str, *, days_ago: int = 0, pinned: bool = False, category: str | None = None
) -> Held:
    return Held(fact_id, content, pinned, False, category, 1, NOW - timedelta(days=days_ago), None)


def _plan(*facts: Held) -> Plan:
    return model_free_plan(facts, NOW, subject=("ana",))


def test_a_later_fact_replaces_an_earlier_one_never_the_reverse() -> None:
    lisbon, porto = _fact(1, "Ana lives in Lisbon", days_ago=3), _fact(2, "Ana moved to Porto")
    plan = _plan(lisbon, porto)

    plan.supersede(2, 1)  # the model took Lisbon for the newer
    assert plan.is_empty()
    plan.supersede(1, 2)
    assert plan.supersessions == [(1, 2)]


def test_a_pinned_fact_is_kept_among_duplicates_and_asked_about_when_contradicted() -> None:
    pinned = _fact(1, "Ana is vegetarian", days_ago=9, pinned=True)
    plan = _plan(
        pinned, _fact(2, "Ana eats no meat"), _fact(3, "Ana lives in Lisbon", days_ago=9, pinned=True)
    )
    plan.merge([2, 1], keep=2)
    plan.supersede(3, 2)  # the keeper of 2 is 1 now; and 3 is pinned
    plan.supersede(1, 3)  # pinned again: asked, never replaced
    plan.retire(1)

    assert plan.merges == {1: [2]} and plan.supersessions == [] and plan.retirements == []
    assert [(q.pinned.id, q.newer.id) for q in plan.questions] == [(3, 1)]
    two_pinned = _plan(pinned, _fact(4, "Ana is a vegetarian", pinned=True))
    assert two_pinned.is_empty()  # near duplicates, both pinned: both stay


def test_a_merged_fact_named_again_means_the_one_kept() -> None:
    plan = _plan(
        _fact(1, "Ana plays the cello", days_ago=2),
        _fact(2, "The user plays cello", days_ago=2),
        _fact(3, "Ana is a cellist", days_ago=2),
        _fact(4, "Ana gave up the cello for the piano"),
    )
    assert plan.merges == {1: [2]} and 2 not in {f.id for f in plan.shown()}
    answer = {"same": [{"ids": [1, 3, 2], "keep": 3}], "replaced": [{"older": 1, "newer": 4}]}
    take_answer(plan, Tidying.model_validate(answer), plan.shown(), now=NOW, timezone="UTC")

    # 2 was not shown (merged before the call): only 1 and 3 merge, and "1" replaced means 3.
    assert plan.merges == {3: [1, 2]} and plan.supersessions == [(3, 4)]


def test_a_plans_date_retires_it_or_dates_it_where_the_person_lives() -> None:
    plan = _plan(_fact(1, "Ana has a dentist appointment"), _fact(2, "Ana flies to Rome", category="plan"))
    answer = Tidying.model_validate(
        {
            "sections": [
                {"id": 1, "section": "plan", "plan_date": "2026-03-09"},
                {"id": 2, "section": "plan", "plan_date": "2026-03-12"},
                {"id": 99, "section": "plan", "plan_date": "2020-01-01"},  # not shown: ignored
            ]
        }
    )
    take_answer(plan, answer, plan.shown(), now=NOW, timezone="Europe/Lisbon")

    assert plan.retirements == [1]
    # The end of the 12th in Lisbon; the category it had is kept.
    assert plan.placements == {2: (None, datetime(2026, 3, 13, 0, 0, tzinfo=UTC))}


def test_the_demo_model_replaces_a_place_with_a_new_one() -> None:
    facts = [
        _fact(3, "The user lives in Lisbon.", days_ago=5),
        _fact(4, "The user is a nurse.", days_ago=4, category="identity"),
        _fact(5, "Ben lives in Oslo.", days_ago=3),
        _fact(7, "The user moved to Porto.", days_ago=1),
        _fact(8, "The user has moved to Porto.", category="identity"),
    ]

    answer = tidy(facts_prompt(facts, date(2026, 3, 10)))

    assert answer["replaced"] == [{"older": 3, "newer": 7}]
    assert answer["same"] == [{"ids": [7, 8], "keep": 7}]
    assert answer["sections"] == [
        {"id": 3, "section": "identity"},
        {"id": 5, "section": "identity"},
        {"id": 7, "section": "identity"},
    ]
