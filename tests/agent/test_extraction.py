"""The extraction agent: typed output, what the model is sent, the settings it runs with."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.settings import Settings
from agent.digest.extraction import Extraction, OpenThread, extract, extraction_prompt
from agent.digest.summaries import Line

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


async def test_facts_keep_only_source_ids_of_the_conversation() -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        args = {
            "user_facts": [
                {"text": "Ana is going to Porto", "message_ids": [1, 2, 1]},
                {"text": "Ana likes flying", "message_ids": [404]},  # not in this conversation
                "Ana travels light",  # no sources at all
            ],
            "summary": "Ana booked her flight.",
            "tone": "upbeat",
        }
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    output = await extract(FunctionModel(model), SETTINGS, LINES, [])

    assert [(f.text, f.message_ids) for f in output.user_facts] == [
        ("Ana is going to Porto", [1, 2]),
        ("Ana likes flying", []),  # the fact stays, its wrong source goes
        ("Ana travels light", []),
    ]


def test_an_extraction_stored_without_sources_still_reads() -> None:
    stored = {"user_facts": ["Ana plays the cello"], "summary": "s", "tone": "warm"}

    facts = Extraction.model_validate(stored).user_facts

    assert [(f.text, f.message_ids) for f in facts] == [("Ana plays the cello", [])]
