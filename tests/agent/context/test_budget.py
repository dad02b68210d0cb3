"""The budget manager: hard cap, cut order and determinism as properties, plus worked examples."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart

from agent.context.budget import CUT_ORDER, Budgets, fit, shrink_block, truncate_text
from agent.context.tiers import TierBlock, TierName
from agent.core.tokens import get_counter

counter = get_counter()
WORDS = ["river", "promise", "coffee", "Berlin", "why", "yes", "tomorrow", "the", "exam", "ünïcödé", "🙂"]

text_st = st.lists(st.sampled_from(WORDS), min_size=1, max_size=400).map(" ".join)
items_st = st.lists(text_st, min_size=1, max_size=6)


def block(name: TierName, items: list[str]) -> TierBlock:
    return TierBlock(name, f"{name}:", tuple(items))


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[TierBlock], dict[str, TierBlock], list[ModelMessage], Budgets]:
    fixed = [block("time", [draw(text_st)])]
    if draw(st.booleans()):
        fixed.append(block("profile", draw(items_st)))
    tiers = {name: block(name, draw(items_st)) for name in CUT_ORDER if draw(st.booleans())}
    turns = draw(st.lists(st.tuples(text_st, text_st), max_size=12))
    history: list[ModelMessage] = []
    for question, answer in turns:
        history += [ModelRequest(parts=[UserPromptPart(question)]), ModelResponse(parts=[TextPart(answer)])]
    total = draw(st.integers(300, 5000))
    budgets = Budgets(
        total=total,
        hard_cap=total + draw(st.integers(0, 3000)),
        history=draw(st.integers(100, 3000)),
        history_min=draw(st.integers(20, 150)),
        tiers={name: draw(st.integers(30, 700)) for name in (*CUT_ORDER, "profile")},
    )
    return fixed, tiers, history, budgets


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_never_over_the_hard_cap(
    case: tuple[list[TierBlock], dict[str, TierBlock], list[ModelMessage], Budgets],
) -> None:
    fixed, tiers, history, budgets = case
    fitted = fit(fixed, tiers, history, budgets=budgets, counter=counter)
    assembled = counter.count(fitted.text) + counter.count_messages(fitted.history)
    assert assembled == fitted.total_tokens
    assert assembled <= budgets.hard_cap


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_lower_priority_tier_is_cut_first(
    case: tuple[list[TierBlock], dict[str, TierBlock], list[ModelMessage], Budgets],
) -> None:
    fixed, tiers, history, budgets = case
    fitted = fit(fixed, tiers, history, budgets=budgets, counter=counter)
    over_total = [c for c in fitted.cuts if c.reason == "total budget"]
    order = [*CUT_ORDER, "history"]
    for cut in over_total:
        # Everything of lower priority than a tier cut for the total budget is gone entirely.
        for lower in order[: order.index(cut.tier)]:
            assert lower not in fitted.blocks
    history_cut = any(c.tier == "history" for c in over_total)
    if history_cut:
        assert not any(name in fitted.blocks for name in CUT_ORDER)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_same_inputs_same_output(
    case: tuple[list[TierBlock], dict[str, TierBlock], list[ModelMessage], Budgets],
) -> None:
    fixed, tiers, history, budgets = case
    first = fit(fixed, tiers, history, budgets=budgets, counter=counter)
    second = fit(list(fixed), dict(tiers), list(history), budgets=budgets, counter=counter)
    assert first == second


@settings(max_examples=80, deadline=None)
@given(text_st, st.integers(0, 200))
def test_truncate_text_fits(text: str, limit: int) -> None:
    short = truncate_text(text, limit, counter)
    assert counter.count(short) <= limit
    if counter.count(text) <= limit:
        assert short == text


def test_cut_order_when_over_the_total() -> None:
    long = " ".join(["coffee"] * 250)
    tiers = {name: block(name, [long]) for name in ("today", "yesterday", "threads", "last_conversation")}
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hello " * 200)]),
        ModelResponse(parts=[TextPart("hi " * 200)]),
    ]
    budgets = Budgets(total=1000, hard_cap=1500, history=3000, history_min=100)
    fitted = fit([block("time", ["It's Tuesday."])], tiers, history, budgets=budgets, counter=counter)
    assert fitted.total_tokens <= 1000
    assert [c.tier for c in fitted.cuts if c.reason == "total budget"] == ["last_conversation", "threads"]
    assert (
        "last_conversation" not in fitted.blocks and "today" in fitted.blocks and "yesterday" in fitted.blocks
    )
    assert fitted.history == history


def test_history_never_below_minimum_and_hard_cap_squeezes_a_huge_turn() -> None:
    huge = " ".join(["river"] * 9000)
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart(huge)]),
        ModelResponse(parts=[TextPart("ok")]),
    ]
    tiers = {"today": block("today", ["a calm day " * 20])}
    fitted = fit([block("time", ["now"])], tiers, history, budgets=Budgets(), counter=counter)
    assert fitted.total_tokens <= 6150
    assert fitted.history_tokens >= 100
    assert "today" not in fitted.blocks
    assert any(c.reason == "hard cap" and c.tier == "history" for c in fitted.cuts)


def test_shrink_block_keeps_best_items_first() -> None:
    b = block("threads", ["- first thing to follow", "- second thing", "- third thing " * 30])
    shrunk = shrink_block(b, counter.count(b.with_items(b.items[:2]).render()) + 3, counter)
    assert shrunk.items == b.items[:2]
