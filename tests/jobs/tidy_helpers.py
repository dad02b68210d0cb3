"""Helpers of the consolidation tests: owners with facts, a scripted consolidation model, the rows."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from bench.clock import FrozenClock
from db.models import FactConsolidation, UserFact
from db.repositories.facts import FactRepository
from jobs.context import JobContext

# A fact as the consolidation prompt lists it: `[id 12; said 2026-03-01, once; no section] words`.
FACT_LINE = re.compile(r"^\[id (\d+);[^\]]*\] (.*)$", re.MULTILINE)
Answer = Callable[[dict[str, int]], dict[str, Any]]


def _prompt(messages: list[ModelMessage]) -> str:
    return "\n".join(
        str(part.content)
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    )


class Tidier:
    """A consolidation model: records every prompt, answers from the facts shown (words -> id),
    and fails the next `fail` calls."""

    def __init__(self, answer: Answer | None = None) -> None:
        self.answer: Answer = answer or (lambda shown: {})
        self.prompts: list[str] = []
        self.instructions: list[str] = []
        self.fail = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = _prompt(messages)
        self.prompts.append(prompt)
        self.instructions.append(
            next((m.instructions or "" for m in messages if isinstance(m, ModelRequest)), "")
        )
        if self.fail > 0:
            self.fail -= 1
            raise ModelHTTPError(status_code=529, model_name="scripted", body="overloaded")
        shown = {words: int(fact_id) for fact_id, words in FACT_LINE.findall(prompt)}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, self.answer(shown))])

    def model(self) -> FunctionModel:
        """The model to put in a job context."""
        return FunctionModel(self)


def job_context(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    model: Any,
    *,
    worker: str = "worker-a",
) -> JobContext:
    """A job context with this summary model."""
    return JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        summary_model=model,
        worker_id=worker,
    )


async def owner(sessions: async_sessionmaker[AsyncSession], name: str, at: datetime) -> int:
    """A person (their name is `name`) and their id."""
    user, _ = await get_or_create_user(sessions, key=f"cli:{name.lower()}", now=at, timezone="UTC", name=name)
    return user.id


async def say(
    sessions: async_sessionmaker[AsyncSession],
    owner_id: int,
    texts: Sequence[str],
    at: datetime,
    *,
    sources: Sequence[int] = (),
    pinned: bool = False,
) -> None:
    """Facts learned about the owner at `at`, as post-processing or the memory tool store them."""
    async with sessions() as session, session.begin():
        await FactRepository(session).add_sourced(
            owner_id, None, [(t, list(sources)) for t in texts], at, source="extraction", pinned=pinned
        )


async def rows(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> dict[str, UserFact]:
    """Every fact row of the owner, held or not, by its words."""
    async with sessions() as session:
        found = (await session.execute(select(UserFact).where(UserFact.user_id == owner_id))).scalars()
        return {f.content: f for f in found}


async def held(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> list[str]:
    """The words of the owner's held facts, oldest first."""
    async with sessions() as session:
        return [f.content for f in await FactRepository(session).held(owner_id)]


async def state(sessions: async_sessionmaker[AsyncSession], owner_id: int) -> FactConsolidation:
    """The owner's consolidation row."""
    async with sessions() as session:
        row = await session.get(FactConsolidation, owner_id)
    assert row is not None
    return row
