"""GRAPH_URL's check, shared by the start's decision (setup.py) and the connection (connect.py);
it imports nothing of graphiti, so a wrong setting stops the start before anything opens."""

from __future__ import annotations

from urllib.parse import urlsplit

from agent.core.errors import ConfigurationError


def check_graph_url(backend: str, url: str | None) -> str:
    """GRAPH_URL of a graph server backend; `ConfigurationError` when missing or of the wrong scheme."""
    if not url:
        raise ConfigurationError(f"GRAPH_URL is required when GRAPH_BACKEND={backend}")
    scheme = urlsplit(url).scheme
    if backend == "falkordb" and scheme not in {"falkor", "falkordb", "redis", "rediss"}:
        raise ConfigurationError(f"GRAPH_URL for FalkorDB must be falkor://host:port, not {scheme}://")
    return url
