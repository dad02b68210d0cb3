"""The extraction agent: typed output, what the model is sent, the settings it runs with."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.digest.extraction import (
    Extraction,
    OpenThread,
    extract,
    extraction_prompt,
    known_block,
    known_budget,
)
from agent.digest.summaries import Line
from agent.memory.known import choose_known
from agent.memory.profile import ProfileFact

# A summary model that takes a temperature (the newest ones refuse it: agent/core/model_lifecycle.py).
SETTINGS = Settings(
    _env_file=None,
    summary_model="anthropic:claude-haiku-4-5",
    summary_temperature=0.1,
    summary_max_tokens=700,
    summary_timeout_seconds=5,
)  # type: ignore[call-arg]
LINES = [
    Line(1, "user", "I finally booked the flight to Porto", datetime(2026, 3, 3, 9, 0, tzinfo=UTC)),
    Line(2, "assistant", "Great! When do you leave?", datetime(2026, 3, 3, 9, 1, tzinfo=UTC)),
]
THREADS = [OpenThread(7, "follow_up", "Did Ana book the flight?")]


async def test_extraction_is_typed_and_only_resolves_threads_it_was_shown() -> None:
    seen: list[AgentInfo] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(info)
        args = {
            "user_facts": ["Ana is going to Porto"],
            "threads_to_open": [{"type": "curiosity", "content": "How is Porto?"}],
            "resolved_thread_ids": [7, 99],
            "thoughts": [],
            "emotional_markers": [{"emotion": "excited", "intensity": 0.8}],
            "key_moments": ["flight booked"],
            "summary": "Ana booked her flight.",
            "tone": "upbeat",
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    output = await extract(FunctionModel(model), SETTINGS, LINES, THREADS)

    assert output.resolved_thread_ids == [7]  # 99 is not one of this user's open threads
    assert output.threads_to_open[0].type == "curiosity"
    assert output.emotional_markers[0].context == ""
    settings = seen[0].model_settings or {}
    assert (settings.get("temperature"), settings.get("max_tokens"), settings.get("timeout")) == (0.1, 700, 5)


def test_prompt_lists_open_threads_and_the_conversation() -> None:
    prompt = extraction_prompt(LINES, THREADS)

    assert "[id 7] (follow_up) Did Ana book the flight?" in prompt
    assert "[#1 09:00 user] I finally booked the flight to Porto" in prompt


async def test_test_model_produces_a_valid_extraction() -> None:
    output = await extract(TestModel(), SETTINGS, LINES, [])

    assert isinstance(output, Extraction) and output.resolved_thread_ids == []


async def test_slow_model_times_out() -> None:
    async def slow(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        await asyncio.sleep(5)
        raise AssertionError("not reached")

    fast = SETTINGS.model_copy(update={"summary_timeout_seconds": 0.05})
    with pytest.raises(TimeoutError):
        await extract(FunctionModel(slow), fast, LINES, [])


async def test_only_facts_standing_on_the_users_own_lines_are_kept(caplog: pytest.LogCaptureFixture) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = {
            "user_facts": [
                {"text": "Ana is going to Porto", "message_ids": [1, 2, 1]},
                {"text": "Ana likes flying", "message_ids": [404]},  # not in this conversation
                {"text": "Ana leaves on Friday", "message_ids": [2]},  # the companion's line only
                "Ana travels light",  # no sources at all
                # The companion asked, the person agreed: it stands on the agreeing line.
                {"text": "Ana is a morning person", "message_ids": [2], "agreed_in": 3},
                {"text": "Ana loves airports", "agreed_in": 2},  # "agreeing" on the companion's line
            ],
            "summary": "Ana booked her flight.",
            "tone": "upbeat",
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    lines = [*LINES, Line(3, "user", "yes, always up at six", datetime(2026, 3, 3, 9, 2, tzinfo=UTC))]
    with caplog.at_level(logging.INFO, logger="agent.memory.grounding"):
        output = await extract(FunctionModel(model), SETTINGS, lines, [], owner=(5, 9))

    assert [(f.text, f.message_ids) for f in output.user_facts] == [
        ("Ana is going to Porto", [1]),
        ("Ana is a morning person", [3]),
    ]
    (record,) = [r for r in caplog.records if r.getMessage() == "facts not grounded"]
    assert record.__dict__["reasons"] == {"companion": 2, "outside": 1, "unsourced": 1}
    assert (record.__dict__["facts_dropped"], record.__dict__["user_id"]) == (4, 5)
    # Counts and reasons, never the words of a fact.
    assert not any("flying" in str(value) for value in record.__dict__.values())


async def test_the_extractor_is_shown_known_facts_and_may_only_name_those() -> None:
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(str(messages[-1].parts[-1].content))
        args = {
            "user_facts": [
                {"text": "Ana flies to Porto", "message_ids": [1], "relation": "same", "known_id": 11},
                {"text": "Ana lives in Porto", "message_ids": [1], "relation": "update", "known_id": 999},
            ],
            "summary": "s",
            "tone": "t",
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    known = [
        ProfileFact(11, "Ana is going to Porto", None, False),
        ProfileFact(12, "Ana has a cat", None, False),
    ]
    output = await extract(FunctionModel(model), SETTINGS, LINES, [], known=known)

    assert "- [fact 11] Ana is going to Porto" in prompts[0]
    # What the person said first, the known facts before the conversation.
    assert prompts[0].index("[fact 11]") < prompts[0].index("[#1 09:00 user]")
    assert [(f.relation, f.known_id) for f in output.user_facts] == [("same", 11), ("new", None)]


def test_the_known_facts_stay_within_their_share_of_the_input() -> None:
    many = [
        ProfileFact(i, f"Ana knows fact number {i} about Porto and more", None, False) for i in range(500)
    ]
    settings = SETTINGS.model_copy(update={"extraction_known_facts_tokens": 10_000})
    static = "instructions " * 400
    prompt = extraction_prompt(LINES, [])
    budget = known_budget(settings, static=static, prompt=prompt)
    counter = get_counter()

    shown = choose_known(many, [LINES[0].content], budget_tokens=budget, count=counter.count)

    # The rest of the input: the instructions, the prompt and the output schema the model is sent.
    rest = (
        counter.count(static)
        + counter.count(prompt)
        + counter.count(json.dumps(Extraction.model_json_schema()))
    )
    assert 0 < len(shown) < 500
    assert counter.count(known_block(shown)) <= 0.15 * rest


def test_an_extraction_stored_without_sources_still_reads() -> None:
    stored = {"user_facts": ["Ana plays the cello"], "summary": "s", "tone": "warm"}

    facts = Extraction.model_validate(stored).user_facts

    assert [(f.text, f.message_ids) for f in facts] == [("Ana plays the cello", [])]
