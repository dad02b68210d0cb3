"""A group chat owns its memory under a row of its own, found by chat id and moved with the chat."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner, is_group, move_group
from agent.account.users import get_or_create_user
from db.models import User

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


async def test_a_group_is_created_once_even_when_its_first_messages_race(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    made = await asyncio.gather(
        *(group_owner(sessions, chat_id=-1001, title="Book club", now=NOW, timezone="UTC") for _ in range(5))
    )
    assert len({owner.id for owner, _ in made}) == 1
    assert sum(new for _, new in made) == 1
    owner = made[0][0]
    assert is_group(owner) and owner.chat_id == -1001 and owner.telegram_id is None
    assert owner.onboarding_status == "complete" and owner.name == "Book club"


async def test_a_member_and_the_group_are_different_owners(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    person, _ = await get_or_create_user(
        sessions, key="telegram:7", now=NOW, timezone="UTC", name="Ana", telegram_id=7
    )
    group, _ = await group_owner(sessions, chat_id=-7, title="Ana's friends", now=NOW, timezone="UTC")
    assert person.id != group.id
    assert not is_group(person) and person.kind == "person" and person.chat_id is None


async def test_the_supergroup_move_keeps_the_memory_and_happens_once(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    before, _ = await group_owner(sessions, chat_id=-55, title="Hikers", now=NOW, timezone="Europe/Rome")
    assert await move_group(sessions, -55, -100_055) is True
    assert await move_group(sessions, -55, -100_055) is False  # Telegram tells both chats
    after, new = await group_owner(sessions, chat_id=-100_055, title="Hikers", now=NOW, timezone="UTC")
    assert not new and after.id == before.id and after.timezone == "Europe/Rome"
    async with sessions() as session:
        keys = (await session.execute(select(User.key).where(User.kind == "group"))).scalars().all()
    assert keys == ["telegram-chat:-100055"]
