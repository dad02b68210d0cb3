"""A group's context names the group and its members: the profile says "Group: <title>", not a
name to call someone; today's raw lines and a compacted history's summary name each speaker. A
person's stay as they were."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.chat.persona import with_name
from agent.context import ContextBuilder
from agent.context.compaction import SUMMARY_INSTRUCTIONS
from agent.core.settings import Settings
from agent.digest.groups import GROUP_PREFACE
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming, Speaker
from db.models import Conversation, User

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
ANA, BEN = Speaker(11, "Ana"), Speaker(12, "Ben")


@pytest.fixture
def instructions() -> list[str]:
    return []


@pytest.fixture
def notes() -> list[str]:
    """Each turn's user prompt, its note (the time tier) included."""
    return []


@pytest.fixture
async def turns(
    database_url: str,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    instructions: list[str],
    notes: list[str],
) -> AsyncIterator[TurnService]:
    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        instructions.append(info.instructions or "")
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        notes.append("\n".join(str(p.content) for p in request.parts if isinstance(p, UserPromptPart)))
        return ModelResponse(parts=[TextPart("sounds good")])

    settings = Settings(database_url=database_url, model="test", _env_file=None)
    service = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(answer))
    yield service
    await service.close()


async def test_a_groups_profile_and_earlier_lines_name_the_group_and_its_members(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], instructions: list[str], notes: list[str]
) -> None:
    group, _ = await group_owner(sessions, chat_id=-9, title="Picnic club", now=NOW, timezone="UTC")
    await turns.hear(
        Incoming(
            owner=group.id, text="the picnic is on Saturday", sent_at=NOW, telegram_message_id=1, speaker=ANA
        )
    )
    await turns.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, coming?",
            sent_at=NOW + timedelta(minutes=1),
            speaker=BEN,
            may_change_memory=False,
        )
    )
    first = instructions[-1]
    assert "About this group:\nGroup: Picnic club" in first
    assert "Name to use" not in first and "About them:" not in first
    assert "(2026-03-02 18:01, UTC); someone in the group last wrote just now." in notes[-1]  # Ana did

    # A pause closed that session; post-processing has not run: its lines are today's raw lines.
    later = NOW + timedelta(minutes=30)
    reply = await turns.group_reply(
        Incoming(
            owner=group.id,
            text="Nikita, what did I say?",
            sent_at=later,
            speaker=ANA,
            may_change_memory=False,
        )
    )
    assert reply.new_conversation
    today = instructions[-1].split("<earlier_today>", 1)[1].split("</earlier_today>", 1)[0]
    assert "18:00 Ana: the picnic is on Saturday" in today
    assert "18:01 Ben: Nikita, coming?" in today
    assert "18:01 You: sounds good" in today
    assert "User:" not in today
    assert "someone in the group last wrote 29 minutes ago" in notes[-1]


def _group_history(turns: int) -> list[ModelMessage]:
    words = " ".join(["the picnic and the sandwiches"] * 30)
    history: list[ModelMessage] = []
    for i in range(turns):
        history += [
            ModelRequest(parts=[UserPromptPart(f"Ana: {i} {words}\nBen (to you): and the cake?")]),
            ModelResponse(parts=[TextPart(words)]),
        ]
    return history


async def _owner_and_conversation(sessions: async_sessionmaker[AsyncSession], user: User) -> Conversation:
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user.id, status="active", started_at=NOW, last_message_at=NOW, messages=[]
        )
        session.add(conversation)
    return conversation


async def test_a_groups_compaction_summary_speaks_of_its_members(
    database_url: str, sessions: async_sessionmaker[AsyncSession]
) -> None:
    seen: list[tuple[str, str]] = []

    def summarise(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        prompt = "".join(str(p.content) for p in request.parts if isinstance(p, UserPromptPart))
        seen.append((info.instructions or "", prompt))
        return ModelResponse(parts=[TextPart("Ana planned a picnic; Ben asked about the cake.")])

    settings = Settings(database_url=database_url, model="test", _env_file=None)
    builder = ContextBuilder(settings, summary_model=FunctionModel(summarise))
    group, _ = await group_owner(sessions, chat_id=-10, title="Picnic club", now=NOW, timezone="UTC")
    person, _ = await get_or_create_user(sessions, key="cli:bo", now=NOW, timezone="UTC", name="Bo")
    for owner in (person, group):
        built = await builder.build(
            sessions,
            user=owner,
            conversation=await _owner_and_conversation(sessions, owner),
            text="hi",
            now=NOW,
            previous_message_at=None,
            history=_group_history(30),
        )
        assert built.snapshot["history"]["compaction"]["status"] == "new"

    words = settings.compaction_summary_max_tokens * 3 // 4
    private = SUMMARY_INSTRUCTIONS.format(max_words=words, persona_name=settings.persona_name)
    (person_instructions, person_prompt), (group_instructions, group_prompt) = seen
    assert person_instructions == private  # a person's, byte for byte
    assert "\nPerson: Ana: 0 " in person_prompt
    assert group_instructions == with_name(GROUP_PREFACE, settings.persona_name) + private
    assert "\nAna: 0 the picnic" in group_prompt and "\nBen (to you): and the cake?" in group_prompt
    assert "Person:" not in group_prompt
