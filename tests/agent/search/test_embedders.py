"""EMBEDDER: the offline models and any PydanticAI embedder, here OpenAI's SDK against a local
OpenAI-compatible `/v1/embeddings` server (batching, base64 vectors, 429 and retries, failures)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.account.users import get_or_create_user
from agent.core.errors import ConfigurationError, EmbeddingFailedError, EmbeddingWidthError
from agent.core.settings import Settings, load_settings
from agent.graph.embedder import GraphitiEmbedder
from agent.search.embedders import build_embedder, open_embedder, shared_embedder
from agent.search.embeddings import MiniLMEmbedder
from agent.search.model_embedder import ModelEmbedder
from agent.turn.transcript import Incoming
from bench.fakes.embeddings_api import FakeEmbeddings
from bench.fakes.hashing_embedder import HashingEmbedder
from bot.preflight import check_settings
from bot.runtime import build_runtime

TEXTS = [f"note {i}: the orchard by the river, plum {i % 3}" for i in range(7)]


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(width=24) as fake, override_allow_model_requests(True):
        yield fake


def hosted(server: FakeEmbeddings, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "embedder": "openai:fake-embed-small",
        "embedder_base_url": server.base_url,
        "embedder_api_key": "sk-local",
        "embedder_retries": 3,
        **overrides,
    }
    return Settings(_env_file=None, **values)  # type: ignore[arg-type]


async def test_batches_decode_base64_and_learn_the_width(server: FakeEmbeddings) -> None:
    embedder = build_embedder(hosted(server, embedder_batch_size=3))
    assert embedder is not None and embedder.dimensions == 0
    await embedder.prepare()
    assert embedder.dimensions == 24 and len(server.bodies) == 1

    vectors = await embedder.embed(TEXTS)

    assert [len(body["input"]) for body in server.bodies[1:]] == [3, 3, 1]
    assert {body["encoding_format"] for body in server.bodies} == {"base64"}  # what the SDK asks for
    assert {body["model"] for body in server.bodies} == {"fake-embed-small"}
    expected = await HashingEmbedder(dimensions=24).embed(TEXTS)
    np.testing.assert_allclose(vectors, expected, atol=1e-6)
    assert vectors.dtype == np.float32 and embedder.name == "openai:fake-embed-small"


async def test_configured_dimensions_are_asked_for_and_not_probed(server: FakeEmbeddings) -> None:
    embedder = await open_embedder(hosted(server, embedder_dimensions=8))
    assert embedder is not None and embedder.dimensions == 8 and server.bodies == []
    assert (await embedder.embed(["one", "two"])).shape == (2, 8)
    assert server.bodies[0]["dimensions"] == 8


async def test_rate_limits_are_retried_until_the_retries_run_out(server: FakeEmbeddings) -> None:
    embedder = build_embedder(hosted(server, embedder_dimensions=24, embedder_retries=2))
    assert embedder is not None
    server.rate_limit(2)
    assert (await embedder.embed(TEXTS[:2])).shape == (2, 24)
    assert (server.refused, len(server.bodies)) == (2, 1)

    server.rate_limit(3)
    with pytest.raises(EmbeddingFailedError, match="429"):
        await embedder.embed(TEXTS[:2])
    assert (server.refused, len(server.bodies)) == (5, 1)


async def test_a_width_change_is_refused(server: FakeEmbeddings) -> None:
    embedder = await open_embedder(hosted(server, embedder_batch_size=2))
    assert embedder is not None and embedder.dimensions == 24
    server.width = 16  # the provider changed its model behind the same name
    with pytest.raises(EmbeddingWidthError, match="16 dimensions"):
        await embedder.embed(TEXTS)


async def test_a_wrong_key_stops_the_start(server: FakeEmbeddings) -> None:
    with pytest.raises(ConfigurationError, match=r"EMBEDDER=openai:fake-embed-small.*401"):
        await open_embedder(hosted(server, embedder_api_key="sk-wrong"))


async def test_a_server_that_does_not_answer_leaves_full_text(caplog: pytest.LogCaptureFixture) -> None:
    with FakeEmbeddings() as gone:
        url = gone.base_url
    settings = Settings(  # type: ignore[call-arg]
        _env_file=None, embedder="openai:m", embedder_base_url=url, embedder_retries=0
    )
    with override_allow_model_requests(True):
        assert await open_embedder(settings) is None
    assert "full text only" in caplog.text


async def test_the_graph_embeds_through_the_same_embedder(server: FakeEmbeddings) -> None:
    embedder = await open_embedder(hosted(server))
    assert embedder is not None
    graph = GraphitiEmbedder(embedder)
    one = await graph.create("I live in Paris")
    assert len(one) == 24
    assert server.bodies[-1]["input"] == ["I live in Paris"]
    assert len(await graph.create_batch(["a", "b", "c"])) == 3


def test_embedder_setting_forms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER", "voyage:voyage-3.5")
    assert check_settings(load_settings()).embedder == "voyageai:voyage-3.5"
    monkeypatch.setenv("EMBEDDER", " minilm ")
    assert check_settings(load_settings()).embedder == "minilm"
    for wrong in ("openai", "openai:", ":model", "mini-lm"):
        monkeypatch.setenv("EMBEDDER", wrong)
        with pytest.raises(ConfigurationError, match=r"EMBEDDER: .*none, minilm, multilingual-e5-small"):
            check_settings(load_settings())
    monkeypatch.setenv("EMBEDDER", "openai:" + "m" * 60)
    with pytest.raises(ConfigurationError, match=r"EMBEDDER: .*longer than 64 characters"):
        check_settings(load_settings())


@pytest.mark.parametrize("kind", ["voyageai:voyage-3.5", "cohere:embed-v4.0"])
def test_a_provider_without_its_package_names_the_install(kind: str) -> None:
    try:
        build_embedder(Settings(_env_file=None, embedder=kind, embedder_api_key="k"))  # type: ignore[call-arg]
    except ConfigurationError as exc:
        assert f"EMBEDDER={kind}" in str(exc) and "pip install" in str(exc)
    else:
        pytest.skip(f"{kind}'s package is installed here")


def test_a_missing_openai_key_names_the_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigurationError, match="EMBEDDER_API_KEY"):
        build_embedder(Settings(_env_file=None, embedder="openai:text-embedding-3-small"))  # type: ignore[call-arg]


async def test_minilm_is_one_model_behind_the_same_interface() -> None:
    settings = Settings(_env_file=None, embedder="minilm", embedder_threads=1)  # type: ignore[call-arg]
    embedder = shared_embedder(settings)
    assert isinstance(embedder, ModelEmbedder)
    assert shared_embedder(settings.model_copy()) is embedder  # one per process
    assert (embedder.name, embedder.dimensions) == ("all-MiniLM-L6-v2-onnx-int8", 384)
    texts = ["I adopted a puppy", "Remind me to call mum on Sunday"]
    direct = MiniLMEmbedder(threads=1).embed_sync(texts)
    np.testing.assert_allclose(await embedder.embed(texts, input_type="query"), direct, atol=1e-6)
    assert build_embedder(settings.model_copy(update={"embedder": "none"})) is None


async def test_the_runtime_embeds_turns_and_searches_with_it(
    server: FakeEmbeddings, database_url: str, engine: AsyncEngine
) -> None:
    settings = hosted(server, database_url=database_url, embedder_dimensions=24)

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("How lovely!")])

    runtime = await build_runtime(
        settings, model=FunctionModel(answer), summary_model=TestModel(), migrate=False
    )
    try:
        assert runtime.recall is not None and runtime.recall.embedder is shared_embedder(settings)
        at = datetime(2026, 3, 3, 10, tzinfo=UTC)
        user, _ = await get_or_create_user(
            runtime.sessions, key="cli:ann", now=at, timezone="UTC", name="Ann"
        )
        await runtime.turns.reply(
            Incoming(owner=user.id, text="We planted plum trees in the orchard", sent_at=at)
        )
        await runtime.settle()
        embedded = [text for body in server.bodies for text in body["input"]]
        assert "Ann: We planted plum trees in the orchard\nNikita: How lovely!" in embedded
        hits = await runtime.recall.search(user.id, "what did we plant", now=at + timedelta(days=1))
        assert hits and hits[0].snippet == "We planted plum trees in the orchard"
        assert server.bodies[-1]["input"] == ["what did we plant"]
    finally:
        await runtime.close()
