"""The graph settings' checks, shared by the start's decision (setup.py) and the connection
(connect.py): GRAPH_URL's scheme, and what an operator reads when the embedded backend is missing.
It imports nothing of graphiti, so a wrong setting stops the start before anything opens."""

from __future__ import annotations

from urllib.parse import urlsplit

from agent.core.errors import ConfigurationError

# What an operator reads when GRAPH_BACKEND=falkordblite is asked for where falkordblite is not
# installed (production images install from wheels, and falkordblite has no Linux wheel).
EMBEDDED_GRAPH_MISSING = (
    "GRAPH_BACKEND=falkordblite needs the embedded extra (in the checkout: pip install -e '.[embedded]'); "
    "on a server set GRAPH_BACKEND=falkordb with GRAPH_URL, or GRAPH_BACKEND=none"
)


def check_graph_url(backend: str, url: str | None) -> str:
    """GRAPH_URL of a graph server backend; `ConfigurationError` when missing or of the wrong scheme."""
    if not url:
        raise ConfigurationError(f"GRAPH_URL is required when GRAPH_BACKEND={backend}")
    scheme = urlsplit(url).scheme
    if backend == "falkordb" and scheme not in {"falkor", "falkordb", "redis", "rediss"}:
        raise ConfigurationError(f"GRAPH_URL for FalkorDB must be falkor://host:port, not {scheme}://")
    return url
