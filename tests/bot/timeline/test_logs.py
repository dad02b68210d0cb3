"""A search through the web server as it runs in production (uvicorn, our logging) leaves neither the
words searched for nor the client's address in the log at INFO."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import socket

import httpx
import uvicorn

from bot.logs import configure_logging
from bot.runtime import Runtime
from bot.web.serve import build_pages_app
from bot.web.server import server_config
from tests.bot.timeline.conftest import Auth
from tests.bot.timeline.seed import ANA, Seeded

WORDS = "Elgar concerto"


async def test_a_search_leaves_neither_its_words_nor_the_address_in_the_log(
    timeline_runtime: Runtime, seeded: Seeded, auth: Auth
) -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    # uvicorn's loggers as a production process has them (the fake servers quiet them for the tests).
    uvicorn_loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn.access")]
    states = [(logger.level, logger.propagate) for logger in uvicorn_loggers]
    for logger in uvicorn_loggers:
        logger.setLevel(logging.NOTSET)
        logger.propagate = True
    stream = io.StringIO()
    installed = configure_logging("INFO", log_format="json", stream=stream)
    listener = socket.socket()
    try:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        server = uvicorn.Server(server_config(build_pages_app(timeline_runtime)))
        serving = asyncio.create_task(server.serve(sockets=[listener]))
        # The socket listens already: the request waits in its backlog until uvicorn accepts it.
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as http:
            found = await http.get("/timeline/api/search", params={"q": WORDS}, headers=auth(ANA))
        server.should_exit = True
        await serving
    finally:
        listener.close()
        root.removeHandler(installed)
        root.handlers[:] = handlers
        root.setLevel(level)
        for logger, (was, propagated) in zip(uvicorn_loggers, states, strict=True):
            logger.setLevel(was)
            logger.propagate = propagated
    assert found.status_code == 200 and found.json()["results"]  # the search ran, and found something
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines  # the server did log (its start and stop)
    text = stream.getvalue()
    assert "Elgar" not in text and "concerto" not in text and "/timeline/api/search" not in text
    # The address appears only where uvicorn says where it listens, never for a client.
    addressed = [line["message"] for line in lines if "127.0.0.1" in json.dumps(line)]
    assert all(message.startswith("Uvicorn running on") for message in addressed), addressed
