"""The fake Bot API's webhook side: POST each queued update to the registered URL, as Telegram does.

Like the real service: the update is the JSON body, the secret token (if one was set) is in
`X-Telegram-Bot-Api-Secret-Token`, an update counts as delivered only on a 2xx answer, anything
else (an error status, a refused connection, a timeout) is retried later with growing pauses, at
most `max_connections` requests are open at once, and one chat's updates go one at a time, in
order (the next only after the previous was acknowledged).
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

import httpx

Json = dict[str, Any]
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def chat_of(update: Json) -> object:
    """What Telegram serialises deliveries by: the chat (or the sender) of the update."""
    for value in update.values():
        if isinstance(value, dict):
            chat = value.get("chat") or (value.get("message") or {}).get("chat")
            if isinstance(chat, dict) and "id" in chat:
                return chat["id"]
            sender = value.get("from")
            if isinstance(sender, dict) and "id" in sender:
                return sender["id"]
    return ("update", update.get("update_id"))


class WebhookPusher:
    """Delivers the fake's queued updates to a webhook until stopped; runs in the fake's event loop."""

    def __init__(
        self,
        queue: list[tuple[int, Json]],
        lock: threading.Lock,
        *,
        url: str,
        secret: str | None,
        max_connections: int = 40,
        retry_first: float = 0.1,
        retry_cap: float = 2.0,
        timeout: float = 60.0,
        allowed: Callable[[Json], bool] = lambda update: True,
    ) -> None:
        self.queue, self.lock = queue, lock
        self.url, self.secret = url, secret
        self.allowed = allowed  # kinds of update the bot did not ask for wait unsent
        self.max_connections = max_connections
        self.retry_first, self.retry_cap, self.timeout = retry_first, retry_cap, timeout
        self.deliveries: list[tuple[int, int | None, float]] = []  # (update_id, status or None, time)
        self.last_error: tuple[int, str] | None = None
        self._in_flight: set[object] = set()
        self._failures: dict[int, int] = {}
        self._not_before: dict[int, float] = {}
        self._wakeup = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._client: httpx.AsyncClient | None = None
        self._requests: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start pushing (call from the fake's event loop)."""
        self._client = httpx.AsyncClient(timeout=self.timeout)
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        """Stop pushing; requests in flight are abandoned (their updates stay queued)."""
        if self._task is not None:
            self._task.cancel()
            for request in list(self._requests):
                request.cancel()
            with suppress(asyncio.CancelledError):
                await self._task
            await asyncio.gather(*self._requests, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()

    def wake(self) -> None:
        """New updates were queued."""
        self._wakeup.set()

    async def _run(self) -> None:
        while True:
            self._wakeup.clear()
            for update_id, update in self._next_batch():
                request = asyncio.create_task(self._deliver(update_id, update))
                self._requests.add(request)
                request.add_done_callback(self._requests.discard)
            with suppress(TimeoutError):
                await asyncio.wait_for(self._wakeup.wait(), 0.05)

    def _next_batch(self) -> list[tuple[int, Json]]:
        now = time.monotonic()
        chosen: list[tuple[int, Json]] = []
        seen: set[object] = set()
        with self.lock:
            for update_id, update in self.queue:
                if not self.allowed(update):
                    continue
                chat = chat_of(update)
                if chat in seen or chat in self._in_flight:
                    seen.add(chat)
                    continue  # one update per chat at a time, oldest first
                seen.add(chat)
                if self._not_before.get(update_id, 0.0) > now:
                    continue
                if len(self._in_flight) >= self.max_connections:
                    break
                self._in_flight.add(chat)
                chosen.append((update_id, update))
        return chosen

    async def _deliver(self, update_id: int, update: Json) -> None:
        assert self._client is not None
        headers = {SECRET_HEADER: self.secret} if self.secret else {}
        status: int | None = None
        try:
            # Encoded as Telegram does (ASCII with escapes): a lone surrogate in a test's text is then
            # sent as its escape, where httpx's UTF-8 encoding would raise before the request.
            body = json.dumps(update).encode()
            headers = {**headers, "Content-Type": "application/json"}
            response = await self._client.post(self.url, content=body, headers=headers)
            status = response.status_code
            error = "" if 200 <= status < 300 else f"Wrong response from the webhook: {status}"
        except httpx.HTTPError as exc:
            error = f"Connection failed: {exc!r}"
        finally:
            with self.lock:
                self._in_flight.discard(chat_of(update))
        self.deliveries.append((update_id, status, time.time()))
        if not error:
            with self.lock:
                self.queue[:] = [(uid, u) for uid, u in self.queue if uid != update_id]
                self._failures.pop(update_id, None)
                self._not_before.pop(update_id, None)
        else:
            failures = self._failures[update_id] = self._failures.get(update_id, 0) + 1
            pause = min(self.retry_cap, self.retry_first * 2 ** (failures - 1))
            self._not_before[update_id] = time.monotonic() + pause
            self.last_error = (int(time.time()), error)
        self.wake()


def on_loop(loop: asyncio.AbstractEventLoop | None, callback: Callable[[], None]) -> None:
    """Run a callback in the fake's loop from any thread (a no-op once the loop is gone)."""
    if loop is not None and not loop.is_closed():
        with suppress(RuntimeError):
            loop.call_soon_threadsafe(callback)
