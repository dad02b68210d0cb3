"""History storage, sanitizing and budget trimming: properties over random histories, plus examples."""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.tokens import get_counter
from agent.history.messages import (
    TrimResult,
    dump_history,
    load_history,
    sanitize_history,
    trim_history,
)

COUNTER = get_counter()
MIN_TOKENS = 100
PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)

words = st.sampled_from(
    ["dog", "Rex", "walk", "coffee", "Berlin", "tomorrow", "😀", "naïve", "work", "sleep"]
)
short_text = st.lists(words, min_size=1, max_size=30).map(" ".join)


@st.composite
def tool_output(draw: st.DrawFn) -> str:
    """Mostly short outputs, sometimes long ones that must be trimmed."""
    n = draw(st.one_of(st.integers(1, 40), st.integers(300, 1200)))
    seed = draw(st.integers(0, 1000))
    return " ".join(f"item{seed + i} value" for i in range(n))


@st.composite
def histories(draw: st.DrawFn, max_turns: int = 6) -> list[ModelMessage]:
    """A valid history: turns of a user prompt, 0-3 tool steps (1-3 parallel calls), a final answer."""
    messages: list[ModelMessage] = []
    call_no = 0
    for _ in range(draw(st.integers(1, max_turns))):
        messages.append(ModelRequest(parts=[UserPromptPart(draw(short_text))]))
        for _ in range(draw(st.integers(0, 3))):
            preface: list[Any] = []
            if draw(st.booleans()):
                preface.append(ThinkingPart(draw(short_text)))
            if draw(st.booleans()):
                preface.append(TextPart(draw(short_text)))
            calls = []
            for _ in range(draw(st.integers(1, 3))):
                call_no += 1
                calls.append(
                    ToolCallPart("search", {"query": draw(short_text)}, tool_call_id=f"call-{call_no}")
                )
            messages.append(ModelResponse(parts=[*preface, *calls]))
            returns: list[Any] = []
            for call in calls:
                if draw(st.integers(0, 5)) == 0:
                    returns.append(
                        ToolReturnPart("search", "bad query", call.tool_call_id, outcome="retried")
                    )
                else:
                    returns.append(ToolReturnPart("search", draw(tool_output()), call.tool_call_id))
            messages.append(ModelRequest(parts=returns))
        messages.append(ModelResponse(parts=[TextPart(draw(short_text))]))
        if draw(st.integers(0, 6)) == 0:
            feedback = RetryFeedbackPart(draw(short_text), retry=RetryInfo(cause="model_retry"))
            messages.append(ModelRequest(parts=[feedback]))
            messages.append(ModelResponse(parts=[TextPart(draw(short_text))]))
    return messages


# -- helpers checking the invariants ---------------------------------------------------------------


def _return_ids(message: ModelMessage) -> set[str]:
    return {p.tool_call_id for p in message.parts if isinstance(p, ToolReturnPart)}


def _call_ids(message: ModelMessage) -> set[str]:
    return {p.tool_call_id for p in message.parts if isinstance(p, ToolCallPart)}


def assert_valid(messages: Sequence[ModelMessage]) -> None:
    """What the Anthropic API needs: a user prompt first, every call answered next, no stray answer."""
    if not messages:
        return
    first = messages[0]
    assert isinstance(first, ModelRequest)
    assert any(isinstance(p, UserPromptPart) for p in first.parts)
    assert isinstance(messages[-1], ModelResponse)
    for i, message in enumerate(messages):
        assert message.parts, "empty message"
        if isinstance(message, ModelResponse):
            nxt = messages[i + 1] if i + 1 < len(messages) else None
            answered = _return_ids(nxt) if isinstance(nxt, ModelRequest) else set()
            assert _call_ids(message) <= answered, "orphan tool call"
        else:
            prev = messages[i - 1] if i else None
            called = _call_ids(prev) if isinstance(prev, ModelResponse) else set()
            assert _return_ids(message) <= called, "orphan tool return"


def _is_trimmed_from(new: Any, old: Any) -> bool:
    return (
        isinstance(new, ToolReturnPart)
        and isinstance(old, ToolReturnPart)
        and new.tool_call_id == old.tool_call_id
        and "tokens trimmed ..." in str(new.content)
    )


def _derived(new: ModelMessage, old: ModelMessage) -> bool:
    """`new` is `old` with some parts removed and/or tool outputs trimmed, in the same order."""
    if new is old:
        return True
    if type(new) is not type(old):
        return False
    old_parts = iter(old.parts)
    return all(any(p is q or _is_trimmed_from(p, q) for q in old_parts) for p in new.parts)


def assert_subsequence(result: Sequence[ModelMessage], source: Sequence[ModelMessage]) -> None:
    it = iter(source)
    for message in result:
        assert any(_derived(message, candidate) for candidate in it), "order not preserved"


def newest_turn(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    starts = [i for i, m in enumerate(messages) if any(isinstance(p, UserPromptPart) for p in m.parts)]
    return list(messages[starts[-1] :]) if starts else []


def trim(messages: Sequence[ModelMessage], budget: int, **kw: Any) -> TrimResult:
    return trim_history(messages, budget=budget, counter=COUNTER, min_tokens=MIN_TOKENS, **kw)


# -- properties --------------------------------------------------------------------------------------


@PROPERTY_SETTINGS
@given(history=histories(), budget=st.integers(0, 6000), max_output=st.sampled_from([0, 50, 300]))
def test_trim_fits_budget_keeps_newest_turn_and_pairs(
    history: list[ModelMessage], budget: int, max_output: int
) -> None:
    before = copy.deepcopy(history)
    result = trim(history, budget, tool_output_max_tokens=max_output)

    assert history == before, "input mutated"
    assert result.tokens == COUNTER.count_messages(result.messages)
    assert result.original_tokens == COUNTER.count_messages(history)
    assert result.dropped_messages == len(history) - len(result.messages)
    assert_valid(result.messages)
    assert_subsequence(result.messages, history)

    newest = newest_turn(history)
    assert any(m is newest[0] for m in result.messages), "the newest turn's prompt must stay"
    assert len(result.messages) >= len(newest)
    within = result.tokens <= max(budget, MIN_TOKENS)
    newest_alone = len(result.messages) == len(newest)
    assert within or newest_alone
    if not within:
        for message in result.messages:
            for part in message.parts:
                if isinstance(part, ToolReturnPart):
                    assert COUNTER.count(part.model_response_str()) <= max_output + 12 or (
                        "tokens trimmed" in str(part.content)
                    )

    again = trim(result.messages, budget, tool_output_max_tokens=max_output)
    assert again.messages == result.messages, "not idempotent"
    assert again.tokens == result.tokens


@PROPERTY_SETTINGS
@given(history=histories(), budget=st.integers(0, 6000))
def test_trim_does_nothing_when_history_fits(history: list[ModelMessage], budget: int) -> None:
    total = COUNTER.count_messages(history)
    result = trim(history, max(budget, total))
    assert result.messages == history
    assert result.trimmed_tool_outputs == 0
    assert result.dropped_messages == 0


@PROPERTY_SETTINGS
@given(history=histories(), data=st.data())
def test_sanitize_repairs_corrupted_histories(history: list[ModelMessage], data: st.DataObject) -> None:
    deleted = data.draw(st.sets(st.integers(0, len(history) - 1), max_size=len(history)))
    corrupted = [m for i, m in enumerate(history) if i not in deleted]
    before = copy.deepcopy(corrupted)

    clean = sanitize_history(corrupted)

    assert corrupted == before, "input mutated"
    assert_valid(clean)
    assert_subsequence(clean, corrupted)
    assert sanitize_history(clean) == clean
    if not deleted:
        assert clean == history


@PROPERTY_SETTINGS
@given(history=histories(max_turns=3), data=st.data())
def test_corrupted_histories_then_trim_stay_valid(history: list[ModelMessage], data: st.DataObject) -> None:
    deleted = data.draw(st.sets(st.integers(0, len(history) - 1), max_size=3))
    corrupted = [m for i, m in enumerate(history) if i not in deleted]
    result = trim(corrupted, data.draw(st.integers(0, 3000)))
    assert_valid(result.messages)


@settings(max_examples=100, deadline=None)
@given(
    raw=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=10),
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "kind",
                        "parts",
                        "part_kind",
                        "content",
                        "tool_call_id",
                        "tool_name",
                        "request",
                        "response",
                    ]
                )
                | st.text(max_size=5),
                inner,
                max_size=4,
            )
        ),
        max_leaves=20,
    )
)
def test_load_history_never_raises_on_garbage(raw: Any) -> None:
    loaded = load_history(raw)
    assert isinstance(loaded, list)
    assert_valid(loaded)


# -- examples --------------------------------------------------------------------------------------


def _agent_run_history() -> list[ModelMessage]:
    """A real two-turn run with a tool loop, as the turn service stores it."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(isinstance(p, UserPromptPart) for p in last.parts):
            return ModelResponse(parts=[ToolCallPart("lookup", {"name": "Rex"})])
        return ModelResponse(parts=[TextPart("Rex is your dog.")])

    agent = Agent(FunctionModel(model), instructions="Be kind.")

    @agent.tool_plain
    def lookup(name: str) -> str:
        """Look a name up."""
        return f"{name}: a dog"

    first = agent.run_sync("who is Rex?")
    second = agent.run_sync("and again?", message_history=first.all_messages())
    return second.all_messages()


def test_dump_load_round_trip_strips_instructions() -> None:
    messages = _agent_run_history()
    assert any(isinstance(m, ModelRequest) and m.instructions for m in messages)

    raw = dump_history(messages)

    assert all("instructions" not in item for item in raw if item["kind"] == "request")
    assert any(isinstance(m, ModelRequest) and m.instructions for m in messages), "input mutated"
    loaded = load_history(raw)
    assert len(loaded) == len(messages) == 8
    assert dump_history(loaded) == raw
    assert_valid(loaded)
    # Nothing else is lost: empty fields and zero counts come back as their defaults.
    assert loaded == [
        dataclasses.replace(m, instructions=None) if isinstance(m, ModelRequest) else m for m in messages
    ]
    assert "null" not in json.dumps(raw)


@pytest.mark.parametrize(
    "raw",
    [
        [{"kind": "nope"}],
        [{"kind": "request", "parts": [{"part_kind": "user-prompt"}]}],
        [1, 2, 3],
        "not a list",
        {"kind": "request"},
    ],
)
def test_broken_stored_history_loads_as_empty(raw: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="agent.history.messages"):
        assert load_history(raw) == []
    assert "starting without it" in caplog.text


def test_load_none_and_empty_is_empty() -> None:
    assert load_history(None) == []
    assert load_history([]) == []


def test_sanitize_drops_leading_orphans_and_pending_requests() -> None:
    call = ToolCallPart("search", {"q": "x"}, tool_call_id="a")
    history: list[ModelMessage] = [
        ModelResponse(parts=[TextPart("stray answer")]),
        ModelRequest(parts=[ToolReturnPart("search", "stray", "zzz")]),
        ModelRequest(parts=[SystemPromptPart("old system"), UserPromptPart("hi")]),
        ModelResponse(parts=[TextPart("checking"), call, ToolCallPart("search", {}, tool_call_id="b")]),
        ModelRequest(parts=[ToolReturnPart("search", "found", "a"), ToolReturnPart("search", "?", "c")]),
        ModelResponse(parts=[TextPart("done")]),
        ModelRequest(parts=[UserPromptPart("unanswered")]),
    ]
    clean = sanitize_history(history)
    assert [type(m) for m in clean] == [ModelRequest, ModelResponse, ModelRequest, ModelResponse]
    assert clean[1].parts == [TextPart("checking"), call]
    assert [p.tool_call_id for p in clean[2].parts if isinstance(p, ToolReturnPart)] == ["a"]


def test_sanitize_pairs_repeated_tool_call_ids_by_position() -> None:
    """FunctionModel and some providers reuse ids; pairing is by adjacency, so duplicates are safe."""
    turn: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("hi")]),
        ModelResponse(parts=[ToolCallPart("t", {}, tool_call_id="same")]),
        ModelRequest(parts=[ToolReturnPart("t", "ok", "same")]),
        ModelResponse(parts=[TextPart("done")]),
    ]
    broken = [*turn, turn[0], turn[1], turn[3]]  # second turn lost its tool return
    clean = sanitize_history(broken)
    assert clean[:4] == turn
    assert clean[4:] == [turn[0], turn[3]]
    assert_valid(clean)


def test_long_tool_output_is_trimmed_head_and_tail() -> None:
    output = " ".join(f"line{i}" for i in range(2000))
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("search please")]),
        ModelResponse(parts=[ToolCallPart("search", {"q": "x"}, tool_call_id="a")]),
        ModelRequest(parts=[ToolReturnPart("search", output, "a")]),
        ModelResponse(parts=[TextPart("found it")]),
        ModelRequest(parts=[UserPromptPart("thanks")]),
        ModelResponse(parts=[TextPart("welcome")]),
    ]
    result = trim(history, 500, tool_output_max_tokens=100)
    assert result.trimmed_tool_outputs == 1
    assert result.dropped_messages == 0
    assert result.tokens <= 500
    part = result.messages[2].parts[0]
    assert isinstance(part, ToolReturnPart)
    content = part.content
    assert isinstance(content, str)
    assert content.startswith("line0 line1")
    assert content.endswith("line1998 line1999")
    assert "tokens trimmed ...]" in content
    assert COUNTER.count(content) <= 100 + 3
    assert history[2].parts[0] == ToolReturnPart("search", output, "a", timestamp=part.timestamp)


def test_newest_turn_is_kept_when_it_alone_is_over_budget() -> None:
    history: list[ModelMessage] = [
        ModelRequest(parts=[UserPromptPart("old " * 200)]),
        ModelResponse(parts=[TextPart("old answer")]),
        ModelRequest(parts=[UserPromptPart("new " * 400)]),
        ModelResponse(parts=[TextPart("new answer")]),
    ]
    result = trim(history, 150)
    assert result.messages == history[2:]
    assert result.tokens > 150
    assert result.dropped_messages == 2


def test_trim_200_messages_is_fast() -> None:
    turns: list[ModelMessage] = []
    for i in range(50):
        turns += [
            ModelRequest(parts=[UserPromptPart(f"message {i} about my dog and the weather " * 3)]),
            ModelResponse(parts=[ToolCallPart("search", {"q": f"dog {i}"}, tool_call_id=f"c{i}")]),
            ModelRequest(parts=[ToolReturnPart("search", f"result {i} " * 150, f"c{i}")]),
            ModelResponse(parts=[TextPart(f"answer {i} with some words " * 4)]),
        ]
    assert len(turns) == 200
    trim(turns, 3000)  # first sight of these texts: the counter encodes them once
    best = min(_timed(lambda: trim(turns, 3000)) for _ in range(5))
    result = trim(turns, 3000)
    assert result.tokens <= 3000
    assert best < 0.05, f"trim of 200 messages took {best * 1000:.1f} ms"


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start
