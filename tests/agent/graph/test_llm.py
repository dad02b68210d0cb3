"""Graphiti's LLM client on the real Anthropic SDK, against the local fake Anthropic API."""

from __future__ import annotations

from graphiti_core.prompts.extract_nodes import ExtractedEntities
from graphiti_core.prompts.models import Message

from agent.graph.llm import anthropic_llm_client, model_name
from tests.fakes.anthropic_api import FakeAnthropic, Reply


def test_model_name_drops_the_provider_prefix() -> None:
    assert model_name("anthropic:claude-haiku-4-5") == "claude-haiku-4-5"
    assert model_name("claude-haiku-4-5") == "claude-haiku-4-5"


async def test_structured_output_travels_as_a_forced_tool_call() -> None:
    with FakeAnthropic(api_key="sk-test") as fake:
        fake.script(Reply.tool_call("ExtractedEntities", {"extracted_entities": [
            {"name": "User", "entity_type_id": 0}, {"name": "Paris", "entity_type_id": 0},
        ]}))
        client = anthropic_llm_client(
            "anthropic:claude-haiku-4-5", api_key="sk-test", base_url=fake.base_url, max_retries=0
        )
        answer = await client.generate_response(
            [
                Message(role="system", content="Extract entities."),
                Message(role="user", content="I live in Paris."),
            ],
            response_model=ExtractedEntities,
        )

    assert [e["name"] for e in answer["extracted_entities"]] == ["User", "Paris"]
    (body,) = fake.message_bodies()
    assert body["model"] == "claude-haiku-4-5"
    assert body["tool_choice"] == {"type": "tool", "name": "ExtractedEntities"}
    assert body["max_tokens"] == 4096
    assert "stream" not in body or body["stream"] is False
