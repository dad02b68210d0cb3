"""A group's turns without Telegram: heard lines go with the next addressed message, once each; a
pause closes the group's session as it closes a person's; an addressed message stored but never
answered is answered with what was heard before it; the stored history stays request, response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.core.settings import Settings
from agent.history.messages import load_history
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, Speaker
from db.models import Conversation, TranscriptMessage
from tests.bot.conftest import last_user_text

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
ANA, BOB = Speaker(11, "Ana"), Speaker(12, "Bob")


@pytest.fixture
def prompts() -> list[str]:
    return []


@pytest.fixture
async def turns(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], prompts: list[str]
) -> AsyncIterator[TurnService]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts.append(last_user_text(messages))
        return ModelResponse(parts=[TextPart(f"answer {len(prompts)}")])

    settings = Settings(database_url=database_url, model="test", _env_file=None)
    service = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(answer))
    yield service
    await service.close()


async def test_heard_lines_go_once_with_the_next_addressed_message(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], prompts: list[str]
) -> None:
    group, _ = await group_owner(sessions, chat_id=-5, title="Friends", now=NOW, timezone="UTC")
    at = NOW
    assert await turns.hear(
        Incoming(owner=group.id, text="the trip is in May", sent_at=at, telegram_message_id=1, speaker=ANA)
    )
    # Repeat again: stored once.
    assert not await turns.hear(
        Incoming(owner=group.id, text="the trip is in May", sent_at=at, telegram_message_id=1, speaker=ANA)
    )
    await turns.hear(
        Incoming(
            owner=group.id,
            text="I'll book the train",
            sent_at=at + timedelta(minutes=1),
            telegram_message_id=2,
            speaker=BOB,
        )
    )
    first = await turns.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, when is it?",
            sent_at=at + timedelta(minutes=2),
            telegram_message_id=3,
            speaker=BOB,
            may_change_memory=False,
        )
    )
    second = await turns.group_reply(
        Incoming(
            owner=group.id,
            text="and thanks",
            sent_at=at + timedelta(minutes=3),
            telegram_message_id=4,
            speaker=ANA,
            may_change_memory=False,
        )
    )
    assert prompts == [
        "Ana: the trip is in May\nBob: I'll book the train\nBob (to you): Nikita, when is it?",
        "Ana (to you): and thanks",
    ]
    assert first.conversation_id == second.conversation_id and not second.new_conversation
    async with sessions() as session:
        conversation = await session.get(Conversation, first.conversation_id)
        assert conversation is not None
        history = load_history(conversation.messages)
    # What the model was sent is what the history keeps: request, response, request, response.
    assert [type(m) for m in history] == [ModelRequest, ModelResponse, ModelRequest, ModelResponse]
    assert conversation.message_count == 4  # the history's version: two answered turns


async def test_a_pause_closes_the_groups_conversation_and_a_stored_message_is_answered_on_resume(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], prompts: list[str]
) -> None:
    group, _ = await group_owner(sessions, chat_id=-6, title="Team", now=NOW, timezone="UTC")
    await turns.hear(
        Incoming(owner=group.id, text="old news", sent_at=NOW, telegram_message_id=1, speaker=ANA)
    )
    later = NOW + timedelta(hours=2)
    await turns.hear(
        Incoming(owner=group.id, text="fresh news", sent_at=later, telegram_message_id=2, speaker=BOB)
    )
    # The process stopped right after storing an addressed message: stored, never answered.
    async with sessions() as session, session.begin():
        await turns.kit.arrival.store(
            session,
            Incoming(owner=group.id, text="Nikita?", sent_at=later, telegram_message_id=3, speaker=ANA),
        )
    resumed = await turns.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita?",
            sent_at=later,
            telegram_message_id=3,
            speaker=ANA,
            may_change_memory=False,
        )
    )
    assert prompts == ["Bob: fresh news\nAna (to you): Nikita?"]
    async with sessions() as session:
        rows = (
            await session.execute(
                select(
                    TranscriptMessage.conversation_id, TranscriptMessage.speaker_name, TranscriptMessage.role
                )
                .where(TranscriptMessage.user_id == group.id)
                .order_by(TranscriptMessage.id)
            )
        ).all()
    old_conversation = rows[0][0]
    assert [(c == old_conversation, name, role) for c, name, role in rows] == [
        (True, "Ana", "user"),
        (False, "Bob", "user"),
        (False, "Ana", "user"),
        (False, None, "assistant"),
    ]
    assert resumed.text == "answer 1"
