"""What the model reads of a history imported from another assistant: every imported line labelled
with its source and day in the person's zone, never presented as a talk with the companion, and
never reaching another person or a group; real turns, real search, on both databases."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo
from sqlalchemy import update
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from db.models import Conversation
from tests.agent.test_tools import ToolScript, make_service
from tests.jobs.import_helpers import import_run, imported_conversation

pytestmark = pytest.mark.both_databases

# 23:30 UTC is already 13 March in Tokyo: the label is the person's day.
ASKED = datetime(2024, 3, 12, 23, 30, tzinfo=UTC)
WORD = "violoncellist"


class Recording(ToolScript):
    """The scripted tool calls, and every request's instructions."""

    def __init__(self, calls: list[tuple[str, dict[str, Any]]]) -> None:
        super().__init__(calls)
        self.instructions: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(info.instructions or "")
        return super().__call__(messages, info)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(database_url=database_url, model="test", _env_file=None)


async def _imported(sessions: async_sessionmaker[AsyncSession], user_id: int, now: datetime) -> list[int]:
    run = await import_run(sessions, user_id, at=now)
    conversation, ids = await imported_conversation(
        sessions,
        user_id,
        run,
        [
            ("user", f"I am a {WORD} in a string quartet, what rosin should I buy?", ASKED),
            (
                "other",
                "As a vegetarian you may prefer a rosin without animal products.",
                ASKED + timedelta(minutes=1),
            ),
        ],
        timezone="Asia/Tokyo",
        today=now,
    )
    async with sessions() as session, session.begin():
        await session.execute(
            update(Conversation)
            .where(Conversation.id == conversation)
            .values(status="processed", summary="Ana asked ChatGPT which rosin to buy.")
        )
    return ids


async def test_imported_lines_are_labelled_and_never_the_companions(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = Recording([])
    service, _ = make_service(settings, engine, sessions, clock, script)
    ana, _ = await get_or_create_user(
        sessions, key="cli:ana", now=clock.now(), timezone="Asia/Tokyo", name="Ana"
    )
    await service.reply(Incoming(owner=ana.id, text="the weather is grey today", sent_at=clock.now()))
    async with sessions() as session, session.begin():
        await session.execute(
            update(Conversation)
            .where(Conversation.user_id == ana.id)
            .values(summary="We talked about grey weather.")
        )
    asked, answered = await _imported(sessions, ana.id, clock.now())
    clock.advance(timedelta(days=2))
    # She also talked with ChatGPT earlier today, and imported that too.
    run = await import_run(sessions, ana.id, at=clock.now(), name="today.json")
    await imported_conversation(
        sessions,
        ana.id,
        run,
        [("user", "any marmalade recipe?", clock.now() - timedelta(hours=1))],
        timezone="Asia/Tokyo",
        today=clock.now(),
    )

    script.calls = [
        ("conversation_search", {"query": f"{WORD} rosin"}),
        ("conversation_get", {"message_id": answered}),
    ]
    await service.reply(Incoming(owner=ana.id, text="what did I ask about rosin?", sent_at=clock.now()))

    found, got = script.returns[-2:]
    [hit] = [r for r in found["results"] if r.get("message_id") == asked]
    assert hit["snippet"].startswith(f"[ChatGPT, 13 Mar 2024] you: I am a {WORD}")
    assert hit["speaker"] == "you"
    assert hit["next_turn"]["speaker"] == "ChatGPT"
    assert hit["next_turn"]["text"].startswith("[ChatGPT, 13 Mar 2024] ChatGPT: As a vegetarian")
    [message] = got["messages"]
    assert (message["speaker"], message["role"]) == ("ChatGPT", "other")
    assert message["content"].startswith("[ChatGPT, 13 Mar 2024] ChatGPT: As a vegetarian")
    # The tools say how such a line reads; the working memory never tells the import as a talk with it.
    instructions = script.instructions[-1]
    assert "Last time we talked" in instructions and "We talked about grey weather." in instructions
    assert "asked ChatGPT" not in instructions and WORD not in instructions
    assert "marmalade" not in instructions  # not "earlier today" with the companion
    await service.close()


async def test_another_person_and_a_group_never_find_an_imported_history(
    settings: Settings, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    script = Recording([])
    service, recall = make_service(settings, engine, sessions, clock, script)
    ana, _ = await get_or_create_user(
        sessions, key="telegram:7", now=clock.now(), timezone="UTC", name="Ana", telegram_id=7
    )
    bob, _ = await get_or_create_user(
        sessions, key="telegram:8", now=clock.now(), timezone="UTC", name="Bob", telegram_id=8
    )
    group, _ = await group_owner(sessions, chat_id=-100_500, title="Quartet", now=clock.now(), timezone="UTC")
    asked, answered = await _imported(sessions, ana.id, clock.now())
    clock.advance(timedelta(days=1))

    for owner in (bob, group):
        for message_id in (asked, answered):
            script.calls = [
                ("conversation_search", {"query": f"{WORD} rosin"}),
                ("conversation_get", {"message_id": message_id}),
            ]
            script.returns.clear()
            script.retries.clear()
            await service.reply(
                Incoming(owner=owner.id, text="search: what rosin did Ana ask about?", sent_at=clock.now())
            )
            shown = json.dumps([script.returns, script.retries, script.instructions[-1]], default=str)
            assert WORD not in shown and "vegetarian" not in shown
            assert len(script.retries) == 1  # the id looks exactly like a missing one
            assert "no message with id" in script.retries[0]
    # Ana herself finds it.
    hits = await recall.search(ana.id, f"{WORD} rosin", now=clock.now())
    assert any(h.message_id == asked for h in hits)
    await service.close()
