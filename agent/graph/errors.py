"""Errors of the graph memory; callers degrade the context on them, never the reply."""

from __future__ import annotations

from agent.core.errors import NikitaError


class GraphMemoryError(NikitaError):
    """The graph database or graphiti failed (connection, query, extraction, timeout)."""


class GraphOpeningError(GraphMemoryError):
    """The graph is still opening (the first seconds after a start): a read goes on without it."""


class EmbeddedGraphInUseError(OSError):
    """The embedded graph's file is open in another process (the bot, usually): one process each."""


class EmbeddingInputError(NikitaError):
    """Graphiti passed token ids instead of text; our embedders only take text."""


# What an operator reads when GRAPH_BACKEND=falkordblite is asked for where falkordblite is not
# installed (production images install from wheels, and falkordblite has no Linux wheel).
EMBEDDED_GRAPH_MISSING = (
    "GRAPH_BACKEND=falkordblite needs the embedded extra (in the checkout: pip install -e '.[embedded]'); "
    "on a server set GRAPH_BACKEND=falkordb with GRAPH_URL, or GRAPH_BACKEND=none"
)
