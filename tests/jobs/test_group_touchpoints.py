"""Touchpoints and groups: the bot never plans to write first into a group (its reminders: test_reminders)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from db.models import Touchpoint
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from tests.jobs.test_reminders import FRIDAY_NOON as NOON

pytestmark = pytest.mark.both_databases

GROUP_CHAT = -100_777
ANA = 7


async def test_no_follow_up_or_check_in_is_ever_planned_for_a_group(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=NOON, timezone="UTC", name="Ana", telegram_id=ANA
    )
    group, _ = await group_owner(sessions, chat_id=GROUP_CHAT, title="Picnic", now=NOON, timezone="UTC")
    plan = NewTouchpoint(None, "how did the picnic go?", NOON + timedelta(days=1), "k1")
    async with sessions() as session, session.begin():
        repo = TouchpointRepository(session)
        assert await repo.plan(group.id, None, "UTC", [plan], at=NOON) == 0
        assert await repo.plan(ana.id, None, "UTC", [plan], at=NOON) == 1
    async with sessions() as session:
        counted = select(Touchpoint.user_id, func.count()).group_by(Touchpoint.user_id)
        by_owner = dict((await session.execute(counted)).all())
    assert by_owner == {ana.id: 1}
