"""Per-user serialisation holds across processes on PostgreSQL (advisory locks)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from pydantic_ai.messages import UserPromptPart
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import FrozenClock
from agent.history.messages import load_history
from agent.history.turn_notes import words
from db.models import Conversation, TranscriptMessage

pytestmark = [pytest.mark.both_databases, pytest.mark.process]

ROOT = Path(__file__).resolve().parents[2]


async def test_two_processes_one_user_one_consistent_history(
    database_url: str, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite is the single-process embedded default")
    user, _ = await get_or_create_user(sessions, key="cli:twin", now=clock.now(), timezone="UTC")
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "tests.agent.turn_worker",
            database_url,
            str(user.id),
            prefix,
            "10",
            cwd=ROOT,
        )
        for prefix in ("a", "b")
    ]
    assert [await w.wait() for w in workers] == [0, 0]

    async with sessions() as session:
        counts = dict(
            (
                await session.execute(
                    select(TranscriptMessage.role, func.count()).group_by(TranscriptMessage.role)
                )
            ).all()
        )
        conversations = (await session.execute(select(Conversation))).scalars().all()
    assert counts == {"user": 20, "assistant": 20}
    assert len(conversations) == 1
    history = load_history(conversations[0].messages)
    assert len(history) == 40
    prompts = [words(p) for m in history[::2] for p in m.parts if isinstance(p, UserPromptPart)]
    answers = [p.content for m in history[1::2] for p in m.parts]
    assert sorted(prompts) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)])
    # Each answer follows its own question: no turn saw another's half-written history.
    assert answers == [f"echo: {p}" for p in prompts]
