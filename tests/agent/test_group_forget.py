"""/forget around groups: a member's own group lines blanked everywhere they live; a group forgotten whole."""

from __future__ import annotations

import json

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import export_user, forget_user
from agent.account.group_forget import DELETED, forget_group_words, group_owner_id
from agent.account.groups import group_owner
from agent.account.timeline import Timeline
from agent.account.users import get_or_create_user
from agent.account.writers import WriteGuard
from agent.core.settings import Settings
from agent.search.recall import Recall
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, write_message
from bench.clock import FrozenClock
from db.models import Conversation, TranscriptMessage, User
from tests.agent.test_tools import make_service

pytestmark = pytest.mark.both_databases

ANA, BOB, CHAT = 7, 8, -100_900
ANA_LINE = "my anawordplan is the lake"
BOB_LINE = "are you coming to the lake?"


def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("sounds good")])


@pytest.fixture
async def world(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> tuple[TurnService, Recall, User, User]:
    settings = Settings(database_url=database_url, model="test", _env_file=None)
    service, recall = make_service(settings, engine, sessions, clock, answer)
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{ANA}", now=clock.now(), timezone="UTC", name="Ana", telegram_id=ANA
    )
    group, _ = await group_owner(sessions, chat_id=CHAT, title="Lake", now=clock.now(), timezone="UTC")
    await service.reply(
        Incoming(owner=ana.id, text="in private: my anawordplan stays with you", sent_at=clock.now())
    )
    # A group turn whose prompt carries the line Ana said before Bob addressed the bot.
    turn = await service.reply(
        Incoming(owner=group.id, text=f"Ana: {ANA_LINE}\nBob (to you): {BOB_LINE}", sent_at=clock.now())
    )
    async with sessions() as session, session.begin():
        addressed = await session.get(TranscriptMessage, turn.message_id)
        assert addressed is not None
        addressed.content, addressed.speaker_telegram_id, addressed.speaker_name = BOB_LINE, BOB, "Bob"
        heard = await write_message(
            session,
            group,
            role="user",
            content=ANA_LINE,
            sent_at=clock.now(),
            conversation_id=turn.conversation_id,
        )
        heard.speaker_telegram_id, heard.speaker_name = ANA, "Ana"
    await recall.settle()
    yield service, recall, ana, group
    await service.close()


async def test_a_members_group_lines_are_blanked_in_transcript_history_and_search(
    world: tuple[TurnService, Recall, User, User],
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    service, recall, ana, group = world
    assert "anawordplan" in json.dumps(
        [h.snippet for h in await recall.search(group.id, "anawordplan", now=clock.now())]
    )

    guard = WriteGuard(sessions)
    assert await forget_group_words(sessions, ANA, caches=[service.histories], guard=guard) == 1

    async with sessions() as session:
        rows = (
            await session.execute(select(TranscriptMessage).where(TranscriptMessage.user_id == group.id))
        ).scalars()
        by_speaker = {r.speaker_telegram_id: r.content for r in rows if r.role == "user"}
        history = json.dumps(
            await session.scalar(select(Conversation.messages).where(Conversation.user_id == group.id))
        )
    assert by_speaker == {ANA: "", BOB: BOB_LINE}
    assert (
        "anawordplan" not in history
        and f"Ana: {DELETED}" in history
        and f"Bob (to you): {BOB_LINE}" in history
    )
    shown = [h.snippet for h in await recall.search(group.id, "anawordplan lake", now=clock.now())]
    assert not any("anawordplan" in (s or "") for s in shown)
    # Her private chat is hers: this part of /forget does not touch it.
    assert any(
        "anawordplan" in (h.snippet or "")
        for h in await recall.search(ana.id, "anawordplan", now=clock.now())
    )
    assert await forget_group_words(sessions, ANA) == 1  # blanking again finds the row, changes nothing


async def test_a_group_forgotten_whole_leaves_its_members_private_memory(
    world: tuple[TurnService, Recall, User, User],
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    service, recall, ana, group = world
    owner = await group_owner_id(sessions, CHAT)
    assert owner == group.id
    result = await forget_user(sessions, owner, [recall], caches=[service.histories], now=clock.now())
    assert result.found and not result.stores_pending

    assert await group_owner_id(sessions, CHAT) is None
    async with sessions() as session:
        assert await session.get(User, group.id) is None
        left = await session.scalar(
            select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.user_id == group.id)
        )
        mine = await session.scalar(
            select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.user_id == ana.id)
        )
    assert left == 0 and mine == 2


async def test_export_and_timeline_hold_the_private_memory_only(
    world: tuple[TurnService, Recall, User, User], sessions: async_sessionmaker[AsyncSession]
) -> None:
    _, recall, ana, group = world
    exported = json.dumps(await export_user(sessions, ana.id, [recall]), default=str)
    assert "in private: my anawordplan" in exported
    # Her own line in the group is the group's memory, like Bob's and the bot's answers there.
    assert ANA_LINE not in exported and BOB_LINE not in exported and "sounds good" in exported
    timeline = Timeline(sessions)
    mine = await timeline.user_for_telegram(ANA)
    assert mine is not None and mine.id == ana.id
    days = await timeline.calendar(mine)
    shown = json.dumps([await timeline.day(mine, d.day) for d in days], default=str)
    assert "anawordplan stays with you" in shown and ANA_LINE not in shown and BOB_LINE not in shown
    # A group has no Telegram user id, so no signed-in timeline can ever be the group's.
    assert await timeline.user_for_telegram(CHAT) is None and group.telegram_id is None
