"""Serving a fake's Starlette app with uvicorn on a free 127.0.0.1 port, in a background thread."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import uvicorn
from starlette.applications import Starlette


class QuickServer(uvicorn.Server):
    """A uvicorn server that stops as soon as `stop_soon()` is called, from any thread.

    uvicorn checks `should_exit` every 0.1 s and pauses 0.1 s more before closing connections;
    tests start and stop hundreds of fakes. Here the stop wakes the loop at once, idle connections
    close right away, and a request in flight still gets its answer within the graceful timeout.
    """

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None

    def stop_soon(self) -> None:
        """Ask the server to stop (thread-safe); `run()`/`serve()` return once it has."""
        self.should_exit = True
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop closed in between: the server is down already
                pass

    async def main_loop(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        if not self.should_exit:  # a stop_soon() before the line above set nothing to wake
            await self._stop.wait()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        for sock in sockets or []:
            sock.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()  # closes an idle connection; one mid-response closes after it
        loop = asyncio.get_running_loop()
        grace = self.config.timeout_graceful_shutdown
        deadline = None if grace is None else loop.time() + grace
        state = self.server_state
        # uvicorn signals nothing when its last connection closes: look, as uvicorn does, only more often.
        while (state.connections or state.tasks) and (deadline is None or loop.time() < deadline):  # noqa: ASYNC110
            await asyncio.sleep(0.002)
        for task in state.tasks:
            task.cancel(msg="Task cancelled, timeout graceful shutdown exceeded")
        await self.lifespan.shutdown()


class LocalServer:
    """`start()` returns the base URL once the port accepts connections; `stop()` joins the thread."""

    def __init__(self, app: Starlette, name: str) -> None:
        self.app = app
        self.name = name
        self._server: QuickServer | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None

    def start(self) -> str:
        """Serve the app; returns `http://127.0.0.1:<port>`."""
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        config = uvicorn.Config(self.app, log_level="warning", access_log=False, lifespan="off")
        server = self._server = QuickServer(config)
        self._thread = threading.Thread(target=server.run, kwargs={"sockets": [self._socket]}, daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 5
        while not server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self.name} failed to start")
            time.sleep(0.002)
        return base_url

    def stop(self) -> None:
        """Stop the server and wait for its thread."""
        if self._server is not None:
            self._server.stop_soon()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._socket is not None:
            self._socket.close()
        self._server, self._thread, self._socket = None, None, None
