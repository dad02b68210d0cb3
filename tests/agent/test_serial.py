"""Turns without an inbox row queue per conversation in the process: in order, never interleaved."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.messages import load_history
from agent.history.turn_notes import words
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from db.models import Conversation

pytestmark = pytest.mark.both_databases

START = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


class Recorder:
    """A model that records what each call saw, and how many calls of each user ran at once."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.in_flight: dict[str, int] = {}
        self.most: dict[str, int] = {}
        self.everyone = 0
        self.most_everyone = 0
        self.seen: dict[str, list[str]] = {}  # prompt -> the earlier prompts in its history

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts = [
            said
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, UserPromptPart) and (said := words(p))
        ]
        prompt, who = prompts[-1], prompts[-1][0]
        self.seen[prompt] = prompts[:-1]
        self.in_flight[who] = self.in_flight.get(who, 0) + 1
        self.most[who] = max(self.most.get(who, 0), self.in_flight[who])
        self.everyone += 1
        self.most_everyone = max(self.most_everyone, self.everyone)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight[who] -= 1
            self.everyone -= 1
        return ModelResponse(parts=[TextPart(f"echo: {prompt}")])


async def test_fast_messages_of_one_conversation_never_interleave_and_others_run_alongside(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession]
) -> None:
    model = Recorder(delay=0.05)
    settings = Settings(database_url=str(engine.url), model="test", _env_file=None)  # type: ignore[call-arg]
    service = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(model))
    users = {
        prefix: (await get_or_create_user(sessions, key=f"cli:{prefix}", now=START, timezone="UTC"))[0].id
        for prefix in "ab"
    }
    # Each user sends five messages a few milliseconds apart; nobody waits for an answer.
    await asyncio.gather(
        *(
            service.reply(
                Incoming(owner=users[prefix], text=f"{prefix}{i}", sent_at=START + timedelta(seconds=i))
            )
            for i in range(5)
            for prefix in "ab"
        )
    )
    await service.close()

    assert model.most == {"a": 1, "b": 1}  # one user's turns one at a time
    assert model.most_everyone == 2  # the two users' turns side by side
    assert len(service.queue) == 0  # no queue outlives its turns
    for prefix in "ab":
        # Each turn saw every earlier turn of its conversation, in order: none half-written.
        for i in range(5):
            assert model.seen[f"{prefix}{i}"] == [f"{prefix}{n}" for n in range(i)]
        async with sessions() as session:
            stored = (
                await session.execute(select(Conversation).where(Conversation.user_id == users[prefix]))
            ).scalar_one()
        history = load_history(stored.messages)
        answers = [p.content for m in history[1::2] for p in m.parts if isinstance(p, TextPart)]
        assert answers == [f"echo: {prefix}{i}" for i in range(5)]
        assert stored.message_count == 10
