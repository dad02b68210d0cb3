"""A local fake of Telegram's Bot API, so tests run the real python-telegram-bot over HTTP, offline.

with FakeTelegram(token="123:ABC") as tg:          # or `async with`
    app = ApplicationBuilder().token(tg.token).base_url(tg.base_url).build()
    ...  # start polling, then tg.user_message(42, "hi"); await tg.wait_for_messages(1, chat_id=42)
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Awaitable, Callable
from contextlib import suppress
from types import TracebackType
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.fakes.serving import QuickServer
from bench.fakes.telegram_drafts import DraftApi
from bench.fakes.telegram_files import FileApi
from bench.fakes.telegram_groups import GroupApi
from bench.fakes.telegram_markup import ApiError, bad_request, check_callback_data, checked_text
from bench.fakes.telegram_params import read_params
from bench.fakes.telegram_records import ApiCall, SentDocument, SentDraft, SentEdit, SentMessage
from bench.fakes.telegram_setup import SetupApi
from bench.fakes.telegram_updates import UpdateFactory
from bench.fakes.telegram_webapp import WebAppApi, check_web_app_buttons
from bench.fakes.telegram_webhook import WebhookPusher, on_loop

__all__ = ["ApiCall", "FakeTelegram", "SentDocument", "SentDraft", "SentEdit", "SentMessage"]

Json = dict[str, Any]
# What bots may upload with sendDocument (https://core.telegram.org/bots/api#senddocument).
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024
# Sent only when named in allowed_updates (getUpdates or setWebhook).
_DEFAULT_EXCLUDED = frozenset(
    {"chat_member", "message_reaction", "message_reaction_count", "stopped_message_generation"}
)


def _error(code: int, description: str, parameters: Json | None = None) -> JSONResponse:
    payload: Json = {"ok": False, "error_code": code, "description": description}
    if parameters:
        payload["parameters"] = parameters
    return JSONResponse(payload, status_code=code)


Handler = Callable[[Json, dict[str, tuple[str, bytes, str]]], Awaitable[Any]]


class FakeTelegram(FileApi, UpdateFactory, GroupApi, WebAppApi, SetupApi, DraftApi):
    """Telegram's Bot API on 127.0.0.1, served by uvicorn in a background thread; records every call."""

    def __init__(
        self,
        token: str = "123:ABC",
        *,
        bot_username: str = "nikita_test_bot",
        now: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(now)
        self.token = token
        self.bot_user: Json = {
            "id": int(token.split(":")[0]),
            "is_bot": True,
            "first_name": "Nikita",
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }
        self.calls: list[ApiCall] = []
        self.sent: list[SentMessage] = []
        self.documents: list[SentDocument] = []
        self.edits: list[SentEdit] = []
        self.deleted: list[tuple[int | str, int]] = []  # (chat_id, message_id) of deleted messages
        # hold_sends(): sendMessage waits (unrecorded) until release_sends(); `dropped` refuses the
        # held ones instead, as Telegram never hears a request whose sender was killed mid-way.
        self._send_gate: threading.Event | None = None
        self.send_held = threading.Event()
        self._drop_held = False
        self.commands: dict[tuple[str, str], list[Json]] = {}
        self.webhook_url = ""
        self.webhook_secret: str | None = None
        self.webhook: WebhookPusher | None = None  # pushes queued updates while a webhook is set
        self._lock = threading.Lock()
        self._queue: list[tuple[int, Json]] = []
        self._next_update_id = 1
        self._allowed: frozenset[str] | None = None
        self._bot_messages: dict[tuple[int | str, int], Json] = {}
        self._failures: dict[str, list[ApiError]] = {}
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakeup: asyncio.Event | None = None
        self._init_web_app()
        self._init_files()
        self._init_drafts()
        self._init_groups()
        self._methods: dict[str, Handler] = {
            name.lower(): getattr(self, f"_api_{name}")
            for name in (
                "getMe",
                "getUpdates",
                "sendMessage",
                "sendChatAction",
                "sendDocument",
                "setWebhook",
                "deleteWebhook",
                "getWebhookInfo",
                "setMyCommands",
                "getMyCommands",
                "deleteMyCommands",
                "answerCallbackQuery",
                "editMessageText",
                "editMessageReplyMarkup",
                "deleteMessage",
                "sendMessageDraft",
                "sendRichMessageDraft",
                "getFile",
                "setChatMenuButton",
                "getChatMenuButton",
                "getChatMember",
                "getChatAdministrators",
                "leaveChat",
                "close",
                "logOut",
            )
        }
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )
        config = uvicorn.Config(
            app,
            log_config=None,
            log_level="warning",
            access_log=False,
            lifespan="off",
            ws="none",
            http="h11",
            timeout_graceful_shutdown=1,
        )
        self._server = QuickServer(config)
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._thread = threading.Thread(target=self._run, name="fake-telegram", daemon=True)
        self.port = 0

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """Pass to `ApplicationBuilder().base_url(...)` / `Bot(base_url=...)`; PTB appends the token."""
        return f"http://127.0.0.1:{self.port}/bot"

    @property
    def base_file_url(self) -> str:
        """Pass to `.base_file_url(...)`; serves the files of `add_file` (see telegram_files.py)."""
        return f"http://127.0.0.1:{self.port}/file/bot"

    def start(self) -> FakeTelegram:
        """Bind a free port and serve until `stop()`; returns once the server accepts connections."""
        self._sock.bind(("127.0.0.1", 0))
        self.port = self._sock.getsockname()[1]
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("fake Telegram server did not start")
            time.sleep(0.002)
        return self

    def stop(self) -> None:
        """End pending long polls, shut the server down and close the socket."""
        self._closing = True
        self._wake()
        self._server.stop_soon()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._sock.close()

    def _run(self) -> None:
        asyncio.run(self._serve())

    async def _serve(self) -> None:
        self._loop, self._wakeup = asyncio.get_running_loop(), asyncio.Event()
        await self._server.serve(sockets=[self._sock])
        await self._set_webhook("", None)

    def _wake(self) -> None:
        if self._wakeup is not None:
            on_loop(self._loop, self._wakeup.set)
        if self.webhook is not None:
            on_loop(self._loop, self.webhook.wake)

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeTelegram:
        return await asyncio.to_thread(self.start)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await asyncio.to_thread(self.stop)

    # -- HTTP ------------------------------------------------------------------------------------
    async def _endpoint(self, request: Request) -> JSONResponse:
        if request.path_params["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.path_params["method"]
        try:
            params, files = await read_params(request)
        except ClientDisconnect:  # the bot process was killed mid-request: nobody to answer
            return _error(400, "Bad Request: client disconnected")
        self.calls.append(ApiCall(method, params))
        handler = self._methods.get(method.lower())
        if handler is None:
            return _error(404, "Not Found")
        try:
            with self._lock:
                queued = self._failures.get(method.lower())
                if queued:
                    raise queued.pop(0)
            return JSONResponse({"ok": True, "result": await handler(params, files)})
        except ApiError as exc:
            return _error(exc.code, exc.description, exc.parameters)

    def fail_next(
        self,
        method: str,
        *,
        error_code: int = 400,
        description: str = "Bad Request: test failure",
        retry_after: int | None = None,
    ) -> None:
        """Make the next call of `method` fail, e.g. 403 "Forbidden: bot was blocked by the user"."""
        params: Json = {"retry_after": retry_after} if retry_after is not None else {}
        with self._lock:
            self._failures.setdefault(method.lower(), []).append(ApiError(error_code, description, params))

    # -- Bot API methods ---------------------------------------------------------------------------
    async def _api_getMe(self, p: Json, files: Any) -> Json:
        return self.bot_user

    async def _api_getUpdates(self, p: Json, files: Any) -> list[Json]:
        if self.webhook_url:
            raise ApiError(
                409,
                "Conflict: can't use getUpdates method while webhook is active; "
                "use deleteWebhook to delete the webhook first",
            )
        offset, limit = int(p.get("offset", 0)), int(p.get("limit", 100))
        if "allowed_updates" in p:
            self._allowed = frozenset(p["allowed_updates"]) or None
        loop, wakeup = asyncio.get_running_loop(), self._wakeup
        assert wakeup is not None
        deadline = loop.time() + float(p.get("timeout", 0))
        while True:
            with self._lock:
                if offset > 0:  # confirms every earlier update
                    self._queue = [(uid, u) for uid, u in self._queue if uid >= offset]
                ready = [u for _, u in self._queue if self._is_allowed(u)][:limit]
            if ready or self._closing or loop.time() >= deadline:
                return ready
            wakeup.clear()  # no await since the check: a push from another thread can't be missed
            with suppress(TimeoutError):
                await asyncio.wait_for(wakeup.wait(), deadline - loop.time())

    def _is_allowed(self, update: Json) -> bool:
        kind = next((key for key in update if key != "update_id"), "")
        return kind in self._allowed if self._allowed is not None else kind not in _DEFAULT_EXCLUDED

    def hold_sends(self) -> None:
        """From now on, sendMessage waits for release_sends() before it is accepted."""
        self.send_held.clear()
        self._drop_held = False
        self._send_gate = threading.Event()

    def release_sends(self, *, dropped: bool = False) -> None:
        """Let held sendMessage calls go on: accepted, or refused unrecorded when `dropped`."""
        self._drop_held = dropped
        gate, self._send_gate = self._send_gate, None
        if gate is not None:
            gate.set()

    async def _api_sendMessage(self, p: Json, files: Any) -> Json:
        gate = self._send_gate
        if gate is not None:
            self.send_held.set()
            await asyncio.to_thread(gate.wait, 60)
            if self._drop_held:
                raise ApiError(400, "Bad Request: the request was never completed")
        check_web_app_buttons(p.get("reply_markup"))
        check_callback_data(p.get("reply_markup"))
        message = self._bot_message(p, text=checked_text(p), **self._ephemeral_fields(p))
        self.sent.append(SentMessage(p["chat_id"], p["text"], p.get("parse_mode"), message["message_id"], p))
        return message

    async def _api_sendDocument(self, p: Json, files: dict[str, tuple[str, bytes, str]]) -> Json:
        if "document" in files:
            filename, content, mime = files["document"]
        elif isinstance(p.get("document"), str):
            filename, content, mime = None, b"", None
        else:
            raise bad_request("there is no document in the request")
        if len(content) > MAX_DOCUMENT_BYTES:
            raise ApiError(413, "Request Entity Too Large")
        doc = self._file("document", file_size=len(content), file_name=filename, mime_type=mime)
        caption = p.get("caption")
        message = self._bot_message(p, document=doc, caption=caption)
        sent = SentDocument(p["chat_id"], filename, content, mime, caption, message["message_id"])
        self.documents.append(sent)
        return message

    async def _api_editMessageText(self, p: Json, files: Any) -> Json | bool:
        if "inline_message_id" in p:
            return True
        key = (p.get("chat_id", ""), int(p.get("message_id", 0)))
        old = self._bot_messages.get(key)
        if old is None:
            raise bad_request("message to edit not found")
        visible = checked_text(p)
        check_callback_data(p.get("reply_markup"))
        if visible == old.get("text") and p.get("reply_markup") == old.get("reply_markup"):
            raise bad_request(
                "message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message"
            )
        old.update(text=visible, entities=p.get("entities"), edit_date=int(self._now()))
        self.edits.append(SentEdit(key[0], key[1], visible, list(p.get("entities") or [])))
        return old

    async def _api_editMessageReplyMarkup(self, p: Json, files: Any) -> Json | bool:
        if "inline_message_id" in p:
            return True
        old = self._bot_messages.get((p.get("chat_id", ""), int(p.get("message_id", 0))))
        if old is None:
            raise bad_request("message to edit not found")
        markup = p.get("reply_markup")
        check_callback_data(markup)
        if markup == old.get("reply_markup"):  # taking buttons off twice too (Telegram says so)
            raise bad_request(
                "message is not modified: specified new message content and reply markup are "
                "exactly the same as a current content and reply markup of the message"
            )
        if markup is None:
            old.pop("reply_markup", None)
        else:
            old["reply_markup"] = markup
        return old

    async def _api_deleteMessage(self, p: Json, files: Any) -> bool:
        key = (p.get("chat_id", ""), int(p.get("message_id", 0)))
        if self._bot_messages.pop(key, None) is None:
            raise bad_request("message to delete not found")
        self.deleted.append(key)
        return True

    def chat_view(self, chat_id: int | str) -> list[str]:
        """The bot's messages in a chat as a user sees them now: edits applied, deleted ones gone."""
        with self._lock:
            shown = sorted((mid, m) for (chat, mid), m in list(self._bot_messages.items()) if chat == chat_id)
        return [message.get("text", "") for _, message in shown]

    async def _ok(self, p: Json, files: Any) -> bool:
        return True

    _api_sendChatAction = _api_answerCallbackQuery = _api_close = _api_logOut = _ok

    def _bot_message(self, p: Json, **content: Any) -> Json:
        if "chat_id" not in p:
            raise bad_request("chat_id is empty")
        chat_id = p["chat_id"]
        message: Json = {
            "message_id": self._next_message_id(chat_id),
            "from": self.bot_user,
            "chat": self._chat(chat_id),
            "date": int(self._now()),
            "reply_markup": p.get("reply_markup"),
            **content,
        }
        message = {key: value for key, value in message.items() if value is not None}
        self._bot_messages[(chat_id, message["message_id"])] = message
        return message

    def _chat(self, chat_id: int | str) -> Json:
        # Lenient on purpose: any chat exists, so jobs may message users who never wrote in this test.
        if isinstance(chat_id, int) and chat_id > 0:
            return {"id": chat_id, "type": "private", "first_name": "User"}
        if isinstance(chat_id, int):
            return {"id": chat_id, "type": "supergroup" if chat_id < -(10**12) else "group", "title": "Group"}
        return {"id": -1001, "type": "channel", "title": "Channel", "username": str(chat_id).lstrip("@")}

    # -- updates the tests push ----------------------------------------------------------------------
    def push_update(self, update: Json) -> Json:
        """Queue an update for getUpdates, giving it the next update_id unless it has one."""
        return self._enqueue(update, verbatim=False)

    def raw_update(self, update: Json) -> Json:
        """Queue an update exactly as given (malformed ones too); a missing update_id still orders it."""
        return self._enqueue(update, verbatim=True)

    def _enqueue(self, update: Json, *, verbatim: bool) -> Json:
        with self._lock:
            update_id = update.get("update_id")
            if not isinstance(update_id, int):
                update_id = self._next_update_id
                update = update if verbatim else {"update_id": update_id, **update}
            self._next_update_id = max(self._next_update_id, update_id + 1)
            self._queue.append((update_id, update))
        self._wake()
        return update

    # -- waiting and reading -------------------------------------------------------------------------
    def calls_to(self, method: str) -> list[ApiCall]:
        """Every recorded call of `method` (case-insensitive)."""
        return [call for call in list(self.calls) if call.method.lower() == method.lower()]

    def messages_to(self, chat_id: int | str | None = None) -> list[SentMessage]:
        """Accepted sendMessage calls, to one chat or to all."""
        return [m for m in list(self.sent) if chat_id is None or m.chat_id == chat_id]

    # Waiters poll state that the server thread writes, so no asyncio primitive could signal them.
    async def wait_for_messages(
        self,
        n: int = 1,
        *,
        chat_id: int | str | None = None,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> list[SentMessage]:
        """Wait until at least n messages were sent (to chat_id if given); return them all."""
        deadline = time.monotonic() + timeout
        wanted = f"{n} messages to {chat_id or 'any chat'}"
        while not _enough(found := self.messages_to(chat_id), n, deadline, wanted):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return found

    def wait_sent(
        self, n: int = 1, *, chat_id: int | str | None = None, timeout: float = 10.0
    ) -> list[SentMessage]:
        """Blocking twin of `wait_for_messages` for sync tests."""
        deadline = time.monotonic() + timeout
        wanted = f"{n} messages to {chat_id or 'any chat'}"
        while not _enough(found := self.messages_to(chat_id), n, deadline, wanted):
            time.sleep(0.01)
        return found

    async def wait_for_documents(self, n: int = 1, *, timeout: float = 10.0) -> list[SentDocument]:  # noqa: ASYNC109
        """Wait until at least n documents were accepted (a call is recorded before its document is
        read, so waiting for the call alone can find no document yet); return them all."""
        deadline = time.monotonic() + timeout
        while not _enough(found := list(self.documents), n, deadline, f"{n} documents"):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return found

    async def wait_for_calls(
        self,
        method: str,
        n: int = 1,
        *,
        timeout: float = 10.0,  # noqa: ASYNC109
    ) -> list[ApiCall]:
        """Wait until `method` was called at least n times; return those calls."""
        deadline = time.monotonic() + timeout
        while not _enough(found := self.calls_to(method), n, deadline, f"{n} calls of {method}"):  # noqa: ASYNC110
            await asyncio.sleep(0.01)
        return found


def _enough(found: list[Any], n: int, deadline: float, wanted: str) -> bool:
    if len(found) >= n:
        return True
    if time.monotonic() > deadline:
        raise AssertionError(f"fake Telegram: waited for {wanted}, got {len(found)}: {found!r}")
    return False
