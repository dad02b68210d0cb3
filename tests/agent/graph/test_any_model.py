"""The graph on a non-Anthropic SUMMARY_MODEL: PydanticAI's OpenAI model against a local
OpenAI-compatible server, through the real `openai` SDK, with temporal invalidation intact."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.models import override_allow_model_requests

from agent.core.settings import Settings
from agent.core.usage import metering
from agent.graph import STANDARD_LIMITS
from agent.graph.pydantic_client import PydanticAIGraphClient
from agent.graph.setup import graph_llm_client
from bench.fakes.graph_llm import ScriptedCall
from bench.fakes.openai_api import FakeOpenAI

from .conftest import GraphFactory
from .test_graphiti_backend import contradict_where_one_lives

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def like_a_model(body: dict[str, Any]) -> dict[str, Any] | str:
    """Answers graphiti's dedupe prompt as the scripted model does, reading the prompt it was sent."""
    schema = json.dumps(body["tools"][0]["function"]["parameters"])
    text = "\n".join(str(m.get("content") or "") for m in body["messages"])
    assert "contradicted_facts" in schema, "only the dedupe prompt is expected on the triplet path"
    return contradict_where_one_lives(ScriptedCall("dedupe_edges.resolve_edge", "EdgeDuplicate", text))


async def test_paris_then_berlin_on_an_openai_compatible_local_server(
    open_graph: GraphFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with FakeOpenAI(like_a_model) as server, override_allow_model_requests(True):
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-local")
        client = graph_llm_client(Settings(_env_file=None, summary_model="openai-chat:local-model"))  # type: ignore[call-arg]
        assert isinstance(client, PydanticAIGraphClient)
        graph = await open_graph(client)
        with metering() as meter:
            await graph.add_episode(7, "user", "facts", "", T0, "c1:user", facts=["I live in Paris."])
            moved_at = T0 + timedelta(weeks=5)
            await graph.add_episode(7, "user", "facts", "", moved_at, "c2:user", facts=["I moved to Berlin."])

    assert len(server.bodies) == 1 and server.bodies[0]["model"] == "local-model"
    assert "I live in Paris" in json.dumps(server.bodies[0]["messages"])
    # The server's usage is the user's graph usage.
    spend = meter.kinds["graph"]
    assert spend.calls == 1 and spend.input_tokens > 10 and spend.output_tokens == 7
    results = await graph.search(7, "where do I live Paris Berlin", limits=STANDARD_LIMITS, now=NOW)
    assert [f.text for f in results.user] == ["I moved to Berlin"]
    exported = await graph.export_user(7)
    paris = next(f for f in exported["groups"]["user"]["facts"] if "Paris" in f["fact"])
    assert paris["invalid_at"] == moved_at.isoformat()
