"""Graphiti's LLM client on the real Anthropic SDK, against the local fake Anthropic API."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from graphiti_core.prompts.extract_nodes import ExtractedEntities
from graphiti_core.prompts.models import Message

from agent.core.usage import metering
from agent.graph import STANDARD_LIMITS
from agent.graph.llm import anthropic_llm_client, model_name
from bench.fakes.anthropic_api import FakeAnthropic, Reply
from bench.fakes.graph_llm import DEFAULT_HANDLERS, ScriptedCall

from .conftest import GraphFactory

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)


def test_model_name_drops_the_provider_prefix() -> None:
    assert model_name("anthropic:claude-haiku-4-5") == "claude-haiku-4-5"
    assert model_name("claude-haiku-4-5") == "claude-haiku-4-5"


async def test_structured_output_travels_as_a_forced_tool_call() -> None:
    entities = {
        "extracted_entities": [{"name": "User", "entity_type_id": 0}, {"name": "Paris", "entity_type_id": 0}]
    }
    # The Messages API counts cached tokens apart from `input_tokens`; the meter counts them within.
    cached = {
        "input_tokens": 40,
        "cache_read_input_tokens": 900,
        "cache_creation_input_tokens": 300,
        "cache_creation": {"ephemeral_5m_input_tokens": 200, "ephemeral_1h_input_tokens": 100},
    }
    with FakeAnthropic(api_key="sk-test") as fake, metering() as meter:
        fake.script(replace(Reply.tool_call("ExtractedEntities", entities), usage=cached))
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
    graph = meter.kinds["graph"]
    assert (graph.calls, graph.input_tokens) == (1, 1240)
    assert (graph.cache_read_tokens, graph.cache_write_tokens, graph.cache_write_1h_tokens) == (900, 300, 100)


@pytest.mark.process
async def test_an_episode_goes_through_the_sdk_and_is_found(open_graph: GraphFactory) -> None:
    """The production client end to end: graphiti -> SDK -> local fake API answering like the script."""

    def like_the_script(body: dict[str, Any]) -> Reply:
        name = body["tool_choice"]["name"]
        text = "\n".join([body.get("system", ""), *(m["content"] for m in body["messages"])])
        return Reply.tool_call(name, DEFAULT_HANDLERS[name](ScriptedCall(None, name, text)))

    with FakeAnthropic(api_key="sk-test", responder=like_the_script) as fake:
        client = anthropic_llm_client("anthropic:claude-haiku-4-5", api_key="sk-test", base_url=fake.base_url)
        graph = await open_graph(client)
        await graph.add_episode(7, "user", "c1", "I work at Acme.", T0, "c1")

    results = await graph.search(7, "Acme", limits=STANDARD_LIMITS, now=T0 + timedelta(days=1))
    assert [f.text for f in results.user] == ["I work at Acme"]
    assert results.user[0].valid_at == T0
    tools = [body["tool_choice"]["name"] for body in fake.message_bodies()]
    assert tools[:2] == ["ExtractedEntities", "ExtractedEdges"]
    assert {body["model"] for body in fake.message_bodies()} == {"claude-haiku-4-5"}
