"""Reactions to the bot's answers, through python-telegram-bot against the fake Bot API: stored,
told to the next turn, seen by the extraction, shown on the timeline, exported and forgotten."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from datetime import date
from typing import Any

import pytest
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import func, select

from agent.account.forget import export_user, forget_user
from agent.account.timeline import Timeline, TimelineUser
from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.runtime import Runtime
from db.models import GeneratedPrompt, MessageReaction, RateLimitEvent, User
from jobs.pipeline import ingested, load
from tests.bot.conftest import Brain, running_bot
from tests.bot.delivery_helpers import eventually

ALICE = 42


async def count(runtime: Runtime, column: object) -> int:
    async with runtime.sessions() as session:
        return int(await session.scalar(select(func.count(column))) or 0)  # type: ignore[call-overload]


@pytest.fixture
async def runtime(
    settings_factory: Callable[..., Settings], engine: Any, brain: Brain
) -> AsyncIterator[Runtime]:
    async with running_bot(settings_factory(onboarding_enabled=False), FunctionModel(brain)) as rt:
        yield rt


@pytest.mark.both_databases
async def test_a_reaction_is_remembered_beside_the_answer(runtime: Runtime, tg: FakeTelegram) -> None:
    start = int(time.time()) - 120  # a minute between each message and the reactions to it
    first = tg.user_message(ALICE, "hi", date=start)
    [answer] = await tg.wait_for_messages(1, chat_id=ALICE)
    events = await count(runtime, RateLimitEvent.id)
    assert tg.reaction(ALICE, 999) is None  # no such message in that chat: Telegram sends nothing
    tg.reaction(ALICE, first["message"]["message_id"], new=["👍"], date=start + 30)  # theirs: not ours
    tg.reaction(ALICE, answer.message_id, new=["❤"], date=start + 30)
    await eventually(lambda: tg.pending_updates == 0)
    await eventually(lambda: count(runtime, MessageReaction.id))
    assert await count(runtime, MessageReaction.id) == 1
    assert await count(runtime, RateLimitEvent.id) == events + 2  # counted as events; no model call
    assert len(tg.messages_to(ALICE)) == 1  # never answered

    # The next turn's context says it once.
    tg.user_message(ALICE, "how are you?", date=start + 60)
    await tg.wait_for_messages(2, chat_id=ALICE)
    async with runtime.sessions() as session:
        prompts = list(
            await session.scalars(select(GeneratedPrompt.instructions).order_by(GeneratedPrompt.id))
        )
        user = await session.scalar(select(User))
    assert user is not None
    assert 'They reacted ❤ to your answer "echo: hi".' in prompts[-1]
    assert "They reacted" not in prompts[0]

    # Changed to 👎: the answer carries 👎 now, everywhere it is read.
    tg.reaction(ALICE, answer.message_id, old=["❤"], new=["👎"], date=start + 90)
    await eventually(lambda: tg.pending_updates == 0)
    await eventually(lambda: _rows(runtime, 3))
    async with runtime.sessions() as session:
        conversation_id = await session.scalar(select(GeneratedPrompt.conversation_id))
        assert conversation_id is not None
        loaded = await load(session, conversation_id)
    assert loaded is not None
    lines = [line.content for line in ingested(loaded).lines]
    assert lines[:2] == ["hi", "echo: hi [they reacted 👎]"] and lines[3] == "echo: how are you?"
    view = await Timeline(runtime.sessions).day(TimelineUser(user.id, user.name, "UTC"), _today(runtime))
    shown = [
        (e.content, e.reactions) for block in view.blocks for e in block.entries if e.role == "assistant"
    ]
    assert shown == [("echo: hi", ("👎",)), ("echo: how are you?", ())]
    exported = await export_user(runtime.sessions, user.id)
    assert [(r["emoji"], r["added"]) for r in exported["reactions"]] == [
        ("❤", True),
        ("❤", False),
        ("👎", True),
    ]

    await forget_user(runtime.sessions, user.id)
    assert await count(runtime, MessageReaction.id) == 0


async def _rows(runtime: Runtime, n: int) -> bool:
    return await count(runtime, MessageReaction.id) >= n


def _today(runtime: Runtime) -> date:
    return runtime.clock.now().date()


@pytest.mark.both_databases
async def test_one_users_reactions_never_reach_another(runtime: Runtime, tg: FakeTelegram) -> None:
    start = int(time.time()) - 120
    bob = ALICE + 1
    tg.user_message(ALICE, "hi", date=start)
    [alice_answer] = await tg.wait_for_messages(1, chat_id=ALICE)
    tg.user_message(bob, "hello", date=start)
    [bob_answer] = await tg.wait_for_messages(1, chat_id=bob)
    tg.reaction(ALICE, alice_answer.message_id, new=["❤"], date=start + 30)
    tg.reaction(bob, bob_answer.message_id, new=["👎"], date=start + 30)
    await eventually(lambda: _rows(runtime, 2))
    tg.user_message(ALICE, "and you?", date=start + 60)
    tg.user_message(bob, "and you?", date=start + 60)
    await tg.wait_for_messages(2, chat_id=ALICE)
    await tg.wait_for_messages(2, chat_id=bob)
    async with runtime.sessions() as session:
        users = {u.key: u.id for u in await session.scalars(select(User))}
        prompts = {
            row.user_id: row.instructions
            for row in await session.scalars(select(GeneratedPrompt).order_by(GeneratedPrompt.id))
        }
    alice, bobs = users[f"telegram:{ALICE}"], users[f"telegram:{bob}"]
    assert "❤" in prompts[alice] and "👎" not in prompts[alice]
    assert "👎" in prompts[bobs] and "❤" not in prompts[bobs]
    assert [r["emoji"] for r in (await export_user(runtime.sessions, alice))["reactions"]] == ["❤"]
    await forget_user(runtime.sessions, bobs)
    assert [r["emoji"] for r in (await export_user(runtime.sessions, alice))["reactions"]] == ["❤"]
