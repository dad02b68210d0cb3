"""The Bot API methods that set a bot up rather than talk: its webhook (set, delete, info) and its
command menus (set, get, delete, per scope and language). `SetupApi` is mixed into the fake Bot API,
which holds the state these methods read and write.
"""

from __future__ import annotations

import threading
from typing import Any

from bench.fakes.telegram_webhook import WebhookPusher

Json = dict[str, Any]


class SetupApi:
    """setWebhook, deleteWebhook, getWebhookInfo, setMyCommands, getMyCommands, deleteMyCommands."""

    commands: dict[tuple[str, str], list[Json]]
    webhook_url: str
    webhook_secret: str | None
    webhook: WebhookPusher | None
    _lock: threading.Lock
    _queue: list[tuple[int, Json]]
    _allowed: frozenset[str] | None

    def _is_allowed(self, update: Json) -> bool:
        """Whether the bot asked for this kind of update (implemented by the server)."""
        raise NotImplementedError

    @property
    def pending_updates(self) -> int:
        """Updates pushed but not yet confirmed by a getUpdates offset."""
        with self._lock:
            return len(self._queue)

    async def _set_webhook(self, url: str, secret: str | None, max_connections: int = 40) -> None:
        if self.webhook is not None:
            await self.webhook.stop()
        self.webhook_url, self.webhook_secret, self.webhook = url, secret, None
        if url:
            self.webhook = WebhookPusher(
                self._queue,
                self._lock,
                url=url,
                secret=secret,
                max_connections=max_connections,
                allowed=self._is_allowed,
            )
            self.webhook.start()

    async def _api_setWebhook(self, p: Json, files: Any) -> bool:
        if "allowed_updates" in p:  # one setting for both ways of receiving, as in Telegram
            self._allowed = frozenset(p["allowed_updates"]) or None
        await self._set_webhook(
            str(p.get("url", "")), p.get("secret_token"), int(p.get("max_connections", 40))
        )
        return True

    async def _api_deleteWebhook(self, p: Json, files: Any) -> bool:
        await self._set_webhook("", None)
        if p.get("drop_pending_updates"):
            with self._lock:
                self._queue.clear()
        return True

    async def _api_getWebhookInfo(self, p: Json, files: Any) -> Json:
        info: Json = {"url": self.webhook_url, "has_custom_certificate": False}
        if self.webhook is not None and self.webhook.last_error is not None:
            info["last_error_date"], info["last_error_message"] = self.webhook.last_error
        return {**info, "pending_update_count": self.pending_updates}

    def _scope(self, p: Json) -> tuple[str, str]:
        return (dict(p.get("scope") or {}).get("type", "default"), str(p.get("language_code", "")))

    async def _api_setMyCommands(self, p: Json, files: Any) -> bool:
        self.commands[self._scope(p)] = list(p.get("commands", []))
        return True

    async def _api_getMyCommands(self, p: Json, files: Any) -> list[Json]:
        return self.commands.get(self._scope(p), [])

    async def _api_deleteMyCommands(self, p: Json, files: Any) -> bool:
        self.commands.pop(self._scope(p), None)
        return True
