"""In a group, conversation_search and conversation_get name each line's speaker (the member, or the
bot by its persona name), not "user"; a person's results stay as they were."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.transcript import Incoming, Speaker
from bench.clock import FrozenClock
from db.models import TranscriptMessage
from tests.agent.test_tools import ToolScript, make_service

pytestmark = pytest.mark.both_databases

ANA, BEN = Speaker(11, "Ana"), Speaker(12, "Ben")


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def _day(sessions: async_sessionmaker[AsyncSession], owner: int) -> tuple[int, list[int]]:
    async with sessions() as session:
        rows = (
            await session.execute(
                select(TranscriptMessage.id, TranscriptMessage.day_segment_id)
                .where(TranscriptMessage.user_id == owner)
                .order_by(TranscriptMessage.id)
            )
        ).all()
    return rows[0].day_segment_id, [r.id for r in rows]


def _search_then_read(day: int, ids: list[int]) -> ToolScript:
    """A model that searches for the cake, then reads the whole day it was said on."""
    whole_day = {"day_segment_id": day, "from_message_id": ids[0], "to_message_id": ids[-1]}
    return ToolScript([("conversation_search", {"query": "lemon cake"}), ("conversation_get", whole_day)])


async def test_a_groups_results_name_the_member_and_the_bot(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    group, _ = await group_owner(sessions, chat_id=-77, title="Bakers", now=clock.now(), timezone="UTC")
    start = clock.now()
    await service.hear(
        Incoming(
            owner=group.id,
            text="the recipe is my grandmother's",
            sent_at=start,
            telegram_message_id=1,
            speaker=ANA,
        )
    )
    await service.hear(
        Incoming(
            owner=group.id, text="I'll bake the lemon cake", sent_at=start + timedelta(minutes=1), speaker=BEN
        )
    )
    await service.hear(
        Incoming(
            owner=group.id, text="with her recipe please", sent_at=start + timedelta(minutes=2), speaker=ANA
        )
    )
    await service.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, sounds good?",
            sent_at=start + timedelta(minutes=3),
            speaker=BEN,
            may_change_memory=False,
        )
    )
    day, ids = await _day(sessions, group.id)

    script = _search_then_read(day, ids)
    service.model = FunctionModel(script)
    await service.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, who bakes?",
            sent_at=start + timedelta(days=1),
            speaker=ANA,
            may_change_memory=False,
        )
    )

    found, got = script.returns
    (hit,) = [h for h in found["results"] if h["kind"] == "message" and "lemon" in h["snippet"]]
    assert hit["speaker"] == "Ben"
    assert hit["previous_turn"]["speaker"] == "Ana" and "grandmother" in hit["previous_turn"]["text"]
    assert hit["next_turn"]["speaker"] == "Ana" and "her recipe" in hit["next_turn"]["text"]
    assert [(m["role"], m.get("speaker")) for m in got["messages"]] == [
        ("user", "Ana"),
        ("user", "Ben"),
        ("user", "Ana"),
        ("user", "Ben"),
        ("assistant", None),  # the bot's own line: its role says it
    ]


async def test_a_persons_results_keep_their_shape(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    service, _ = make_service(settings, engine, sessions, clock, ToolScript([]))
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC", name="ana")
    start = clock.now()
    await service.reply(Incoming(owner=user.id, text="I'll bake the lemon cake", sent_at=start))
    await service.reply(
        Incoming(owner=user.id, text="with my grandmother's recipe", sent_at=start + timedelta(minutes=1))
    )
    day, ids = await _day(sessions, user.id)

    script = _search_then_read(day, ids)
    service.model = FunctionModel(script)
    await service.reply(Incoming(owner=user.id, text="what do I bake?", sent_at=start + timedelta(days=1)))

    found, got = script.returns
    (hit,) = [h for h in found["results"] if h["kind"] == "message" and "lemon" in h["snippet"]]
    assert hit["speaker"] == "ana" and hit["next_turn"]["speaker"] == settings.persona_name
    assert [set(m) for m in got["messages"]] == [
        {"message_id", "role", "content", "created_at", "day_segment_id"}
    ] * len(ids)
