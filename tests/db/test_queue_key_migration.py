"""Migration 0030_inbox_queue_key on an inbox with rows: each open row joins its chat's queue."""

from __future__ import annotations

import asyncio
from datetime import datetime

from alembic import command
from sqlalchemy import text

from db.engine import create_engine
from db.migrate import alembic_config

BEFORE = "0029_reactions"
AT = datetime(2026, 3, 3, 9, 0)


async def test_the_queue_key_is_the_chat_else_the_sender(empty_url: str) -> None:
    config = alembic_config(empty_url)
    await asyncio.to_thread(command.upgrade, config, BEFORE)
    engine = create_engine(empty_url)
    rows = [(1, 7, 7), (2, 7, -1001), (3, 7, None), (4, None, 9)]  # update id, sender, chat
    async with engine.begin() as conn:
        for update_id, sender, chat in rows:
            await conn.execute(
                text(
                    "INSERT INTO inbox_updates (update_id, telegram_user_id, chat_id, status, received_at,"
                    " available_at, attempts, reply_chunks_sent, resumed_sends)"
                    " VALUES (:id, :sender, :chat, 'pending', :at, :at, 0, 0, 0)"
                ),
                {"id": update_id, "sender": sender, "chat": chat, "at": AT},
            )
    await engine.dispose()
    await asyncio.to_thread(command.upgrade, config, "head")
    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        keys = dict((await conn.execute(text("SELECT update_id, queue_key FROM inbox_updates"))).all())
    await engine.dispose()
    assert keys == {1: 7, 2: -1001, 3: 7, 4: 9}
    await asyncio.to_thread(command.downgrade, config, BEFORE)
