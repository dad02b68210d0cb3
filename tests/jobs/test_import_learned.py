"""The last message of an import: once every imported conversation is post-processed, the chat the
import came from is told what it taught, once; an operator's import tells no one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.users import get_or_create_user
from bench.clock import FrozenClock
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import TelegramMessenger
from db.models import ImportRun
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, extraction_reply
from tests.jobs.import_helpers import import_run, imported_conversation

TOKEN = "123:ABC"
ASKED = datetime(2024, 3, 12, 18, 30, tzinfo=UTC)


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def told(ctx: JobContext, tg: FakeTelegram) -> AsyncIterator[JobContext]:
    """The job context with the bot's messenger on the fake Bot API."""
    async with Bot(TOKEN, base_url=tg.base_url) as bot:
        ctx.messenger = TelegramMessenger(bot)
        yield ctx


async def _imported(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, telegram_id: int, chat_id: int | None
) -> tuple[int, int]:
    user, _ = await get_or_create_user(
        sessions, key=f"telegram:{telegram_id}", now=clock.now(), timezone="UTC", telegram_id=telegram_id
    )
    run = await import_run(sessions, user.id, at=clock.now(), name=f"export-{telegram_id}.zip")
    async with sessions() as session, session.begin():
        await session.execute(update(ImportRun).where(ImportRun.id == run).values(chat_id=chat_id))
    _, (asked, _) = await imported_conversation(
        sessions,
        user.id,
        run,
        [
            ("user", "I keep bees on my roof; how do I get through winter?", ASKED),
            ("other", "Insulate the hive and leave them their honey.", ASKED + timedelta(minutes=1)),
        ],
        external_id=f"chatgpt:{telegram_id}",
        today=clock.now(),
    )
    return run, asked


async def test_the_chat_an_import_came_from_is_told_once_what_it_taught(
    told: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
    tg: FakeTelegram,
) -> None:
    run, asked = await _imported(sessions, clock, telegram_id=42, chat_id=42)
    scripted.extraction = extraction_reply(user_facts=[{"text": "They keep bees", "message_ids": [asked]}])

    first = await run_job("imports", told)
    assert (first["queued"], first["told"]) == (1, 0)  # queued, not yet read: nothing to tell
    assert (await run_job("postprocess", told))["processed"] == 1
    assert (await run_job("imports", told))["told"] == 1
    [notice] = tg.messages_to(42)
    assert "finished reading your ChatGPT history" in notice.text
    assert "1 thing about you over 1 day" in notice.text
    # Once: the next runs (or a second instance's pacer) tell nothing again.
    assert (await run_job("imports", told))["told"] == 0
    assert len(tg.messages_to(42)) == 1
    async with sessions() as session:
        learned_at = await session.scalar(select(ImportRun.learned_at).where(ImportRun.id == run))
    assert learned_at is not None


async def test_an_operators_import_is_marked_learned_and_tells_no_one(
    told: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
    tg: FakeTelegram,
) -> None:
    run, _ = await _imported(sessions, clock, telegram_id=7, chat_id=None)
    scripted.extraction = extraction_reply(user_facts=[])
    await run_job("imports", told)
    assert (await run_job("postprocess", told))["processed"] == 1
    assert (await run_job("imports", told))["told"] == 0
    assert tg.sent == []
    async with sessions() as session:
        assert await session.scalar(select(ImportRun.learned_at).where(ImportRun.id == run)) is not None
