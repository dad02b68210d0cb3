"""Touchpoints and groups: the bot never plans to write first into a group, nor checks in on one as on a
quiet person (a group's reminders: test_reminders)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.touchpoints.check_ins import plan_check_ins
from db.models import ConversationThread, Touchpoint, User
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


async def test_a_quiet_group_is_never_taken_for_a_quiet_person_to_check_in_on(
    sessions: async_sessionmaker[AsyncSession], settings: Settings
) -> None:
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=NOON, timezone="UTC", name="Ana", telegram_id=ANA
    )
    group, _ = await group_owner(sessions, chat_id=GROUP_CHAT, title="Picnic", now=NOON, timezone="UTC")
    async with sessions() as session, session.begin():
        # The group has been quiet longer: were it a candidate, it would come first and use the one place.
        for owner, last in ((group.id, NOON - timedelta(days=9)), (ana.id, NOON - timedelta(days=5))):
            await session.execute(update(User).where(User.id == owner).values(last_message_at=last))
            session.add(
                ConversationThread(
                    user_id=owner, type="promise", content="the picnic", dedupe_key="picnic", created_at=last
                )
            )
    with_check_ins = settings.model_copy(update={"touchpoint_check_in_days": 3})
    assert await plan_check_ins(sessions, with_check_ins, NOON, limit=1) == 1
    async with sessions() as session:
        planned = (await session.execute(select(Touchpoint.user_id, Touchpoint.kind))).all()
    assert planned == [(ana.id, "check_in")]
