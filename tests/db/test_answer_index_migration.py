"""Migration 0037_receipt on a database where a message was answered twice: the first answer stays
the answer, the other stays unlinked, and from then on a second answer to a message is refused."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
from alembic import command
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine
from db.migrate import alembic_config
from tests.db.conftest import user_at_revision

BEFORE = "0036_graph_work"
AT = datetime(2026, 3, 3, 9, 0)


async def _message(engine: AsyncEngine, user_id: int, role: str, content: str, reply_to: int | None) -> int:
    async with engine.begin() as conn:
        return int(
            (
                await conn.execute(
                    text(
                        "INSERT INTO transcript_messages (user_id, role, kind, content, reply_to_id, sent_at)"
                        " VALUES (:user, :role, 'text', :content, :reply_to, :at) RETURNING id"
                    ),
                    {"user": user_id, "role": role, "content": content, "reply_to": reply_to, "at": AT},
                )
            ).scalar_one()
        )


async def test_a_message_keeps_its_first_answer_and_gets_no_second(empty_url: str) -> None:
    config = alembic_config(empty_url)
    user_id = await user_at_revision(empty_url, BEFORE, AT)
    engine = create_engine(empty_url)
    asked = await _message(engine, user_id, "user", "hi", None)
    first = await _message(engine, user_id, "assistant", "hello", asked)
    second = await _message(engine, user_id, "assistant", "hello again", asked)
    await engine.dispose()

    await asyncio.to_thread(command.upgrade, config, "head")
    engine = create_engine(empty_url)
    async with engine.connect() as conn:
        links = dict((await conn.execute(text("SELECT id, reply_to_id FROM transcript_messages"))).all())
    assert links == {asked: None, first: asked, second: None}
    with pytest.raises(IntegrityError):
        await _message(engine, user_id, "assistant", "a third", asked)
    await _message(engine, user_id, "user", "a user's line may point at it", asked)
    await engine.dispose()

    await asyncio.to_thread(command.downgrade, config, BEFORE)
    engine = create_engine(empty_url)
    await _message(engine, user_id, "assistant", "a third", asked)
    await engine.dispose()
