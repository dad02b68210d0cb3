"""Errors of the graph memory; callers degrade the context on them, never the reply."""

from __future__ import annotations

from agent.errors import NikitaError


class GraphMemoryError(NikitaError):
    """The graph database or graphiti failed (connection, query, extraction, timeout)."""
