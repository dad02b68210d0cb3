"""`POST /tasks/inbox`: work the inbox until it is empty, for an external scheduler.

On a host that only gives the process CPU during a request (Cloud Run with request-based billing),
a scheduler calling this every minute makes sure nothing waits in the inbox for long.
"""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.delivery.runner import DeliveryRunner
from db.inbox import InboxRepository

# Under the usual request timeouts of schedulers and hosts.
DRAIN_SECONDS = 50.0


def routes(runner: DeliveryRunner, *, authorized: Callable[[Request], bool]) -> list[BaseRoute]:
    """The inbox's task route (before the generic `/tasks/{name}`)."""

    async def drain(request: Request) -> Response:
        if not authorized(request):
            return Response("forbidden", status_code=403)
        before = runner.dispatcher.worked
        emptied = await runner.dispatcher.drain(within=DRAIN_SECONDS)
        async with runner.inbox.sessions() as session:
            counts = await InboxRepository(session).counts()
        result = {"emptied": emptied, "worked": runner.dispatcher.worked - before, "rows": counts}
        return JSONResponse({"ok": True, "job": "inbox", "result": result})

    return [Route("/tasks/inbox", drain, methods=["POST"])]
