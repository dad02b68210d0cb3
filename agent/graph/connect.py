"""Opening the graph database: embedded FalkorDB (falkordblite) by default, a server by URL in production."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import shutil
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote, urlsplit, urlunsplit

from graphiti_core.driver.driver import GraphDriver
from graphiti_core.driver.falkordb_driver import FalkorDriver
from graphiti_core.driver.neo4j_driver import Neo4jDriver
from redis.asyncio import BlockingConnectionPool, Redis

from agent.core.errors import ConfigurationError, EmbeddedGraphInUseError
from agent.core.settings import Settings
from agent.graph.urls import EMBEDDED_GRAPH_MISSING, check_graph_url

logger = logging.getLogger(__name__)

ServerBackend = Literal["falkordblite", "falkordb", "neo4j"]

# The settings' defaults (GRAPH_MAX_CONNECTIONS, GRAPH_CONNECTION_WAIT_SECONDS), for callers without settings.
MAX_CONNECTIONS: int = Settings.model_fields["graph_max_connections"].default
CONNECTION_WAIT_SECONDS: float = Settings.model_fields["graph_connection_wait_seconds"].default


@dataclass
class GraphConnection:
    """A graph driver plus whatever must be stopped with it (the embedded server)."""

    backend: ServerBackend
    driver: GraphDriver
    embedded: Any = field(default=None, repr=False)
    # FalkorDB's bounded pool (None on Neo4j, whose driver keeps its own waiting pool).
    pool: BlockingConnectionPool | None = field(default=None, repr=False)
    # The embedded graph's lock file, held open (and locked) until the server is stopped.
    lock: Any = field(default=None, repr=False)

    async def has_graph(self, name: str) -> bool:
        """Whether FalkorDB holds the graph `name`, asked without creating it (always true on Neo4j).

        A graph is a key of its own: one EXISTS, answered by the server every time and never cached,
        so a graph another process just deleted is seen as gone.
        """
        if not isinstance(self.driver, FalkorDriver):
            return True
        found: int = await self.driver.client.connection.exists(name)
        return found > 0

    async def drop_graph(self, name: str) -> None:
        """Delete one FalkorDB graph (a user group's partition) if it exists."""
        if not isinstance(self.driver, FalkorDriver):
            return
        if await self.has_graph(name):
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
        if self.lock is not None:
            self.lock.close()  # closing the file releases the lock
            self.lock = None


async def open_connection(
    backend: ServerBackend,
    *,
    url: str | None = None,
    path: str = "./data/graph.db",
    max_connections: int = MAX_CONNECTIONS,
    connection_wait_seconds: float = CONNECTION_WAIT_SECONDS,
) -> GraphConnection:
    """Connect (or start the embedded database) for the GRAPH_BACKEND / GRAPH_URL / GRAPH_PATH settings.

    On FalkorDB (embedded or server) at most `max_connections` connections are open; a query beyond
    them waits up to `connection_wait_seconds` for one (then `redis.ConnectionError`).
    """
    if backend == "falkordblite":
        return await _open_embedded(Path(path), max_connections, connection_wait_seconds)
    url = check_graph_url(backend, url)
    parts = urlsplit(url)
    user = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password else None
    if backend == "falkordb":
        database = parts.path.strip("/") or "default_db"
        driver = FalkorDriver(
            host=parts.hostname or "localhost",
            port=parts.port or 6379,
            username=user,
            password=password,
            database=database,
        )
        client = driver.client.connection
        # A FalkorDB cluster gets redis-py's cluster client, which keeps a pool per node of its own.
        bounded = isinstance(client, Redis)
        pool = _bound_pool(client, max_connections, connection_wait_seconds) if bounded else None
        return GraphConnection(backend, driver, pool=pool)
    # Credentials travel separately to the Neo4j driver; the URI keeps scheme, host and port only.
    netloc = parts.hostname or "localhost"
    if parts.port:
        netloc += f":{parts.port}"
    uri = urlunsplit((parts.scheme, netloc, "", "", ""))
    database = parts.path.strip("/") or "neo4j"
    return GraphConnection(backend, Neo4jDriver(uri, user, password, database=database))


def _bound_pool(client: Redis, max_connections: int, wait_seconds: float) -> BlockingConnectionPool:
    """Give `client` a pool that waits for a free connection instead of failing, same connection settings.

    FalkorDB's client (falkordb-py, and falkordblite's on top of it) keeps redis-py's plain pool, which
    raises "Too many connections" past its size, so a busy process loses graph queries. Swapped in
    here, before the client's first command, because falkordblite learns its socket only once its
    server runs, and the same swap then serves the server URL's client too.
    """
    plain = client.connection_pool
    pool = BlockingConnectionPool(
        connection_class=plain.connection_class,
        max_connections=max_connections,
        timeout=wait_seconds,
        **plain.connection_kwargs,
    )
    client.connection_pool = pool
    return pool


async def _open_embedded(path: Path, max_connections: int, wait_seconds: float) -> GraphConnection:
    try:
        from redislite.async_falkordb_client import AsyncFalkorDB  # type: ignore[import-untyped]
    except ImportError as exc:
        raise ConfigurationError(EMBEDDED_GRAPH_MISSING) from exc
    lock = _lock_embedded(path)
    # Starting redis-server blocks for a moment: keep it off the event loop.
    starting = asyncio.ensure_future(asyncio.to_thread(_start_embedded, AsyncFalkorDB, path))
    try:
        lite = await asyncio.shield(starting)
    except asyncio.CancelledError:
        # Cancelled mid-start (a stop while the graph opens): the thread still starts the server,
        # which must not outlive us.
        await asyncio.wait({starting})
        if starting.exception() is None:  # a start that failed left nothing running
            await _stop_embedded(starting.result())
        lock.close()
        raise
    except BaseException:
        lock.close()
        raise
    logger.info("embedded FalkorDB started", extra={"path": str(path)})
    # falkordblite's AsyncFalkorDB wraps redis.asyncio.Redis as `_client` (commands are proxied to it).
    pool = _bound_pool(lite.client._client, max_connections, wait_seconds)
    return GraphConnection("falkordblite", FalkorDriver(falkor_db=lite), embedded=lite, pool=pool, lock=lock)


def _lock_embedded(path: Path) -> Any:
    """Hold `<GRAPH_PATH>.lock` for as long as this connection runs the embedded server.

    falkordblite lets a second opener of the same file attach to the first one's redis-server, and
    that opener's close then stops the server under the first: `bot reindex` or `bot chat` run beside
    the bot would take the bot's graph down. So one process at a time: the second is refused with
    the holder's pid. The lock is the kernel's (flock), so a killed holder leaves none behind.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.with_name(path.name + ".lock")
    handle = open(lock_path, "a+", encoding="utf-8")  # held open until close()
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip() or "unknown"
        handle.close()
        raise EmbeddedGraphInUseError(
            f"the embedded graph {path} is open in another process (pid {holder}): stop it first, "
            "or run the graph on a server (GRAPH_BACKEND=falkordb)"
        ) from None
    handle.seek(0)
    handle.truncate()
    handle.write(str(os.getpid()))
    handle.flush()
    return handle


def _start_embedded(factory: Any, path: Path) -> Any:
    return factory(dbfilename=str(path.resolve()))


async def _stop_embedded(lite: Any) -> None:
    # falkordblite 0.11: AsyncFalkorDB.close() closes the socket but marks its server "async managed"
    # and never stops it, leaving redis-server running after we exit; and redislite's own stop waits
    # seconds for nothing (see `_stop_server`). So the server is stopped here.
    server = lite.client._sync_client
    # Read first: closing may run redislite's cleanup, which forgets them without stopping anything.
    pid, folder, registry = server.pid, server.redis_dir, server.settingregistryfile
    await lite.close()
    server._async_managed = False
    await asyncio.to_thread(_stop_server, server, pid)
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    if server.cleanupregistry and registry:
        with contextlib.suppress(FileNotFoundError):
            os.remove(registry)
    # Nothing left for redislite's exit hook to do.
    server.running, server.redis_dir, server.pidfile, server.settingregistryfile = False, None, None, None


def _stop_server(server: Any, pid: int | None) -> None:
    """Stop an embedded redis-server, saving its file.

    Done by hand because redislite's `_cleanup` skips the stop while any other client is connected
    (a pool still closing was enough to leave redis-server running after the bot exited), its
    redis-py client retries SHUTDOWN's expected connection error with backoff (~3 s), and it then
    waits for the daemonised server's zombie to be reaped by PID 1 (1-2 s here; never, in a
    container where Python itself is PID 1). A stop must fit Cloud Run's 10 s.
    """
    # falkordblite's client library (the embedded backend only).
    from redis import RedisError
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    server.set_retry(Retry(NoBackoff(), 0))
    with contextlib.suppress(RedisError, OSError):
        server.client_kill_filter(_type="normal", skipme=True)  # the server is this process's
        server.shutdown(save=True, now=True, force=True)  # saves the file, then exits
    if pid:
        for sig in (None, signal.SIGTERM, signal.SIGKILL):
            if sig is not None:
                logger.warning("embedded FalkorDB did not stop; signalling it", extra={"signal": sig.name})
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            if _gone_within(pid, 5.0):
                break


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.02)
    return False


def _running(pid: int) -> bool:
    """Whether `pid` still runs (an exited process waiting to be reaped does not)."""
    with contextlib.suppress(ChildProcessError):  # our child (we are PID 1): reap it
        if os.waitpid(pid, os.WNOHANG)[0]:
            return False
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc here: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True
