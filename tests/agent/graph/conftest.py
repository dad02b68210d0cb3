"""Graph fixtures: a real embedded FalkorDB (falkordblite) in a temporary file and the scripted model."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
from graphiti_core.llm_client import LLMClient

from agent.graph.graphiti_backend import GraphitiGraph
from agent.search.embeddings import Embedder
from bench.clock import FrozenClock
from bench.fakes.graph_llm import ScriptedLLMClient
from bench.fakes.hashing_embedder import HashingEmbedder

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
HAVE_FALKORDBLITE = importlib.util.find_spec("redislite") is not None

GraphFactory = Callable[..., Awaitable[GraphitiGraph]]


@pytest.fixture
def graph_path(tmp_path: Path) -> str:
    """Where the embedded graph database keeps its file."""
    return str(tmp_path / "graph.db")


@pytest.fixture
async def open_graph(graph_path: str, clock: FrozenClock) -> AsyncIterator[GraphFactory]:
    """Open `GraphitiGraph` on embedded FalkorDB (closed after the test) with a given scripted model
    and embedder (and `open_graph`'s connection options)."""
    from agent.graph import open_graph

    # Outside CI a machine without falkordblite skips; in CI the tests run (and fail if it is missing).
    if not HAVE_FALKORDBLITE and not IN_CI:
        pytest.skip("falkordblite is not installed (CI always installs it and runs these tests)")
    opened: list[GraphitiGraph] = []

    async def _open(
        llm: LLMClient | None = None,
        path: str = graph_path,
        persona_name: str = "Nikita",
        embedder: Embedder | None = None,
        **options: float,
    ) -> GraphitiGraph:
        graph = await open_graph(
            "falkordblite",
            url=None,
            path=path,
            llm_client=llm or ScriptedLLMClient(),
            embedder=embedder or HashingEmbedder(),
            clock=clock,
            persona_name=persona_name,
            **options,  # type: ignore[arg-type]  # max_connections, connection_wait_seconds
        )
        assert isinstance(graph, GraphitiGraph)
        opened.append(graph)
        return graph

    yield _open
    for graph in opened:
        await graph.close()


@pytest.fixture
async def graph(open_graph: GraphFactory) -> GraphitiGraph:
    """A `GraphitiGraph` with the default scripted model."""
    return await open_graph()
