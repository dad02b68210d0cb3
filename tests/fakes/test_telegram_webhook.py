"""The fake Bot API's webhook delivery behaves like Telegram's: secret header, retries, one per chat."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from telegram import Bot

from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.telegram_webhook import SECRET_HEADER

TOKEN = "123:ABC"


class Receiver:
    """A webhook endpoint that fails the first attempt of some updates and records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, str | None, int]] = []  # (update_id, secret, status answered)
        self.fail_once: set[int] = set()
        self.in_flight: dict[object, int] = {}
        self.overlap = False
        self.delay = 0.0

    async def endpoint(self, request: Request) -> Response:
        update: dict[str, Any] = await request.json()
        update_id = update["update_id"]
        chat = update["message"]["chat"]["id"]
        self.in_flight[chat] = self.in_flight.get(chat, 0) + 1
        self.overlap |= self.in_flight[chat] > 1
        await asyncio.sleep(self.delay)
        self.in_flight[chat] -= 1
        status = 500 if update_id in self.fail_once else 200
        self.fail_once.discard(update_id)
        self.requests.append((update_id, request.headers.get(SECRET_HEADER), status))
        return Response(status_code=status)


@pytest.fixture
async def receiver() -> AsyncIterator[tuple[Receiver, str]]:
    found = Receiver()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(
        Starlette(routes=[Route("/hook", found.endpoint, methods=["POST"])]), log_config=None, lifespan="off"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await wait_until(lambda: server.started)
    yield found, f"http://127.0.0.1:{sock.getsockname()[1]}/hook"
    server.should_exit = True
    await task
    sock.close()


async def wait_until(condition: Any, seconds: float = 10.0) -> None:
    for _ in range(int(seconds / 0.02)):
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not met in time")


async def test_updates_are_pushed_with_the_secret_and_retried_until_acknowledged(
    receiver: tuple[Receiver, str],
) -> None:
    found, url = receiver
    async with FakeTelegram(token=TOKEN) as tg, Bot(TOKEN, base_url=tg.base_url) as bot:
        first = tg.user_message(7, "one")
        found.fail_once.add(first["update_id"])
        await bot.set_webhook(url, secret_token="s3cret")
        await wait_until(lambda: tg.pending_updates == 0)
        info = await bot.get_webhook_info()
    assert [(uid, secret) for uid, secret, _ in found.requests] == [(first["update_id"], "s3cret")] * 2
    assert [status for *_, status in found.requests] == [500, 200]
    assert info.pending_update_count == 0 and "500" in (info.last_error_message or "")


async def test_one_chat_at_a_time_in_order_and_chats_in_parallel(receiver: tuple[Receiver, str]) -> None:
    found, url = receiver
    found.delay = 0.05
    async with FakeTelegram(token=TOKEN) as tg, Bot(TOKEN, base_url=tg.base_url) as bot:
        sent = [tg.user_message(chat, f"{chat}-{n}") for n in range(4) for chat in (1, 2, 3)]
        found.fail_once.add(sent[3]["update_id"])  # chat 1's second update fails once
        await bot.set_webhook(url)
        await wait_until(lambda: tg.pending_updates == 0)
    assert not found.overlap
    acknowledged = [uid for uid, _, status in found.requests if status == 200]
    for chat in (1, 2, 3):
        ids = [u["update_id"] for u in sent if u["message"]["chat"]["id"] == chat]
        assert [uid for uid in acknowledged if uid in ids] == ids
    # Chats were served side by side: the whole took far less than 12 sequential requests.
    assert len(found.requests) == 13


async def test_a_refused_connection_is_retried_and_polling_is_refused_meanwhile() -> None:
    async with FakeTelegram(token=TOKEN) as tg, Bot(TOKEN, base_url=tg.base_url) as bot:
        tg.user_message(7, "nobody listens")
        await bot.set_webhook("http://127.0.0.1:9/hook")
        await wait_until(lambda: tg.webhook is not None and tg.webhook.last_error is not None)
        assert tg.pending_updates == 1
        await bot.delete_webhook()
        assert len(await bot.get_updates(timeout=0)) == 1


async def test_only_the_kinds_of_update_the_webhook_asked_for_are_pushed(
    receiver: tuple[Receiver, str],
) -> None:
    found, url = receiver
    async with FakeTelegram(token=TOKEN) as tg, Bot(TOKEN, base_url=tg.base_url) as bot:
        first = tg.user_message(7, "one")
        assert tg.reaction(7, first["message"]["message_id"]) is not None
        last = tg.user_message(7, "two")
        await bot.set_webhook(url, allowed_updates=["message"])
        # One chat's updates go in order: a reaction that was pushed would come between the two.
        await wait_until(lambda: len(found.requests) == 2)
        assert [update_id for update_id, _, _ in found.requests] == [first["update_id"], last["update_id"]]
