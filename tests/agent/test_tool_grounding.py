"""A fact the chat's tools write on the person's behalf stands on the message the turn answers: the
person's own (in a group, the words of the member the fact names), on both databases."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.transcript import Incoming, Speaker
from bench.clock import FrozenClock
from db.models import UserFact
from tests.agent.test_tools import ToolScript, make_service

pytestmark = pytest.mark.both_databases

ANA, BEN = Speaker(11, "Ana Silva"), Speaker(12, "Ben")


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def _facts(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> dict[str, list[int]]:
    async with sessions() as session:
        rows = await session.execute(
            select(UserFact.content, UserFact.message_ids).where(
                UserFact.user_id == owner_id, UserFact.invalidated_at.is_(None)
            )
        )
        return {content: list(ids) for content, ids in rows}


async def test_a_tools_fact_stands_on_the_persons_message(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = ToolScript(
        [
            ("memory_add", {"fact": "Ana has a cat named Miso"}),
            ("memory_correct", {"wrong": "cat", "correct": "Ana has two cats"}),
        ]
    )
    service, _ = make_service(settings, engine, sessions, clock, script)
    ana, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="Ana")

    result = await service.reply(
        Incoming(owner=ana.id, text="Remember that I have a cat named Miso", sent_at=clock.now())
    )

    assert script.returns[0]["saved"] is True and script.returns[1]["corrected"] is True
    assert await _facts(sessions, ana.id) == {"Ana has two cats": [result.message_id]}


async def test_in_a_group_a_members_fact_stands_on_that_members_words(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = ToolScript(
        [
            ("memory_add", {"fact": "Ana Silva has a sister in Porto"}),  # Ben's words about Ana
            ("memory_pin", {"fact": "Has a dog"}),  # no member named
            ("memory_add", {"fact": "Ben has a dog named Rex"}),
        ]
    )
    service, _ = make_service(settings, engine, sessions, clock, script)
    group, _ = await group_owner(sessions, chat_id=-88, title="Walkers", now=clock.now(), timezone="UTC")
    await service.hear(
        Incoming(owner=group.id, text="I have a sister in Porto", sent_at=clock.now(), speaker=ANA)
    )

    result = await service.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, remember Ana's sister is in Porto and my dog Rex",
            sent_at=clock.now() + timedelta(minutes=1),
            speaker=BEN,
            may_change_memory=True,
        )
    )

    assert [r.get("saved", r.get("pinned")) for r in script.returns] == [False, False, True]
    assert "not saved" in script.returns[0]["note"]
    assert await _facts(sessions, group.id) == {"Ben has a dog named Rex": [result.message_id]}
