"""The inbox row travels with its update through python-telegram-bot to the handlers' context."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine, async_sessionmaker
from telegram import Update

from agent.core.clock import Clock
from bot.app import build_application
from bot.delivery.worked_row import WorkedRow
from bot.delivery.worked_update import WorkedUpdate
from bot.handlers.context import HandlerContext
from bot.runtime import Runtime
from db.inbox import LeasedUpdate

CHAT = 42

PAYLOAD: dict[str, Any] = {
    "update_id": 9001,
    "message": {
        "message_id": 7,
        "date": 1_700_000_000,
        "chat": {"id": CHAT, "type": "private", "first_name": "Alice"},
        "from": {"id": CHAT, "is_bot": False, "first_name": "Alice"},
        "text": "hello",
    },
}


def worked(engine: AsyncEngine, payload: dict[str, Any]) -> WorkedRow:
    row = LeasedUpdate(1, payload["update_id"], CHAT, CHAT, payload, "pending", None, 0, 0)
    return WorkedRow(row, "test", async_sessionmaker(engine), Clock())


async def test_the_update_is_read_from_its_row_and_carries_it(engine: AsyncEngine, runtime: Runtime) -> None:
    application = build_application(runtime, webhook=False)
    row = worked(engine, PAYLOAD)
    update = WorkedUpdate.of(row, application.bot)
    assert isinstance(update, Update) and update.row is row
    assert update.update_id == 9001 and update.effective_message is not None
    assert update.effective_message.text == "hello"
    # The row is no part of the update's JSON.
    assert update.to_dict() == Update.de_json(PAYLOAD, application.bot).to_dict()

    context = HandlerContext.from_update(update, application)
    assert context.row is row
    assert context.services is application.bot_data.services


async def test_an_update_from_elsewhere_has_no_row(runtime: Runtime) -> None:
    application = build_application(runtime, webhook=False)
    context = HandlerContext.from_update(Update.de_json(PAYLOAD, application.bot), application)
    assert context.row_if_any is None
    with pytest.raises(RuntimeError, match="no inbox row"):
        _ = context.row


async def test_json_that_is_no_update_is_refused(engine: AsyncEngine, runtime: Runtime) -> None:
    application = build_application(runtime, webhook=False)
    with pytest.raises((ValueError, TypeError, KeyError, AttributeError)):
        WorkedUpdate.of(worked(engine, {"update_id": 1, "message": "not an object"}), application.bot)
