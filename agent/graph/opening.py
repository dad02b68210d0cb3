"""A knowledge graph that opens in the background, so no reply waits for it at start.

Opening the graph imports graphiti, may start the embedded database's server and builds indices:
a second or more, and longer on a graph server that is slow to answer. The runtime opens it after
the process takes updates (bot/runtime.py). Until it is open, a search raises `GraphOpeningError`
(a `GraphError`): the facts tier has no lines and the fact search reads the saved facts,
without a warning. Writes, /forget and /export wait for the opening (a minute at most, then they
fail as on a graph that does not answer). A graph that does not open is off from then on, as at
any start.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from agent.core.errors import GraphError, GraphOpeningError
from agent.graph.base import KnowledgeGraph
from agent.graph.null import NullGraph
from agent.graph.wrapper import GraphWrapper

logger = logging.getLogger(__name__)

# How long a write waits for the opening (then it fails as on a graph that does not answer, and its
# caller retries as it does then), and how long a stop waits before cutting the opening short.
WRITE_WAIT_SECONDS = 60.0
CLOSE_WAIT_SECONDS = 10.0


class OpeningGraph(GraphWrapper):
    """A `KnowledgeGraph` whose graph `opener` opens once, in the background, on `start()` or first need."""

    def __init__(self, opener: Callable[[], Awaitable[KnowledgeGraph]]) -> None:
        super().__init__(NullGraph())  # until the opening gives the graph
        self._opener = opener
        self._opening: asyncio.Task[KnowledgeGraph] | None = None
        self._graph: KnowledgeGraph | None = None

    def start(self) -> None:
        """Begin opening (once)."""
        if self._opening is None:
            self._opening = asyncio.create_task(self._open(), name="graph-opening")

    async def _open(self) -> KnowledgeGraph:
        try:
            self._graph = await self._opener()
        except Exception:
            # The task's top: nobody may be awaiting it yet. The graph is off, as when it cannot open.
            logger.exception("knowledge graph off: opening it failed")
            self._graph = NullGraph()
        self.wrapped = self._graph
        return self._graph

    async def opened(self, *, within: float | None = None) -> KnowledgeGraph:
        """The graph, once open (`NullGraph` when it did not open); starts the opening if needed.

        With `within`, a `GraphOpeningError` when it is not open by then.
        """
        self.start()
        assert self._opening is not None
        try:
            # Shielded: a caller given up on (a cancelled job, a timeout) must not cut the opening short.
            return await asyncio.wait_for(asyncio.shield(self._opening), within)
        except TimeoutError:
            raise GraphOpeningError(f"the knowledge graph is still opening after {within:g} s") from None

    async def _keeper(self) -> KnowledgeGraph:
        """Writes, /forget and /export wait for the opening."""
        return await self.opened(within=WRITE_WAIT_SECONDS)

    @property
    def is_open(self) -> bool:
        """True once the graph is open and on."""
        return self._graph is not None and not isinstance(self._graph, NullGraph)

    def _reader(self) -> KnowledgeGraph:
        """The graph for a read, which never waits: still opening, or off, is a `GraphError`."""
        if self._graph is None:
            raise GraphOpeningError("the knowledge graph is still opening")
        if isinstance(self._graph, NullGraph):
            raise GraphError("the knowledge graph is off: it did not open")
        return self._graph

    async def close(self) -> None:
        """Close the graph; an opening in progress is waited for (a server it starts must be stopped)."""
        opening = self._opening
        if opening is None:
            return
        done, _ = await asyncio.wait({opening}, timeout=CLOSE_WAIT_SECONDS)
        if not done:
            logger.warning("knowledge graph still opening at stop; cut short")
            opening.cancel()
            await asyncio.wait({opening})
        if not opening.cancelled():
            await opening.result().close()
