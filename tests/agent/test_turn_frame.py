"""The turn frame's guarantees, for every surface that plugs into it: one turn of a user at a time,
a message stored before the answer and answered once however often it is delivered, the daily
budgets refusing onboarding like chat, and the receipt committing with the answer or not at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.core.usage import Spend, UsageMeter, store_usage
from agent.turn.daily_tokens import CAP_REPLY, COUNTERS
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from db.models import TranscriptMessage
from db.repositories.access import AccessRepository

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


class Model:
    """Answers every request, or raises `fail` once; counts the requests."""

    def __init__(self) -> None:
        self.requests = 0
        self.fail: BaseException | None = None

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests += 1
        if self.fail is not None:
            fail, self.fail = self.fail, None
            raise fail
        return ModelResponse(parts=[TextPart(f"answer {self.requests}")])


class Receipts:
    """A surface's receipt: records each answer in the turn's transaction, or raises once."""

    def __init__(self) -> None:
        self.answers: list[str] = []
        self.fail = False

    async def __call__(self, session: AsyncSession, answer: str) -> None:
        if self.fail:
            self.fail = False
            raise RuntimeError("the surface lost the update")
        self.answers.append(answer)


@pytest.fixture
def model() -> Model:
    return Model()


@pytest.fixture
async def turns(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], model: Model
) -> AsyncIterator[TurnService]:
    settings = Settings(database_url=database_url, model="test", user_daily_tokens=100, _env_file=None)
    service = TurnService(settings=settings, engine=engine, sessions=sessions, model=FunctionModel(model))
    yield service
    await service.close()


async def new_user(sessions: async_sessionmaker[AsyncSession], key: str, status: str = "complete") -> int:
    user, _ = await get_or_create_user(sessions, key=key, now=NOW, timezone="UTC", onboarding_status=status)
    return user.id


async def rows(sessions: async_sessionmaker[AsyncSession]) -> list[tuple[str, str, str]]:
    async with sessions() as session:
        found = await session.execute(
            select(TranscriptMessage.role, TranscriptMessage.kind, TranscriptMessage.content).order_by(
                TranscriptMessage.id
            )
        )
    return [tuple(row) for row in found.all()]  # type: ignore[misc]


async def spend(sessions: async_sessionmaker[AsyncSession], user_id: int, tokens: int) -> None:
    meter = UsageMeter()
    meter.add("chat", Spend(calls=1, input_tokens=tokens))
    async with sessions() as session, session.begin():
        await store_usage(session, user_id, NOW.date(), meter)


async def test_onboarding_and_chat_over_the_user_budget_are_refused_alike(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], model: Model
) -> None:
    pending, done = await new_user(sessions, "t:1", "pending"), await new_user(sessions, "t:2")
    await spend(sessions, pending, 100)
    await spend(sessions, done, 100)
    receipts = Receipts()
    refused = await turns.onboard(
        Incoming(owner=pending, text="hi", sent_at=NOW, telegram_message_id=1, receipt=receipts)
    )
    chat = await turns.reply(
        Incoming(owner=done, text="hello", sent_at=NOW, telegram_message_id=1, receipt=receipts)
    )
    assert refused is not None and refused.text == chat.text == CAP_REPLY
    assert model.requests == 0 and receipts.answers == [CAP_REPLY, CAP_REPLY]
    assert ("user", "onboarding", "hi") in await rows(sessions)
    assert ("user", "text", "hello") in await rows(sessions)
    async with sessions() as session:
        counts = await AccessRepository(session).counts(NOW.date())
    assert counts[COUNTERS["user"]] == 2


async def test_an_onboarding_answer_that_failed_to_commit_is_answered_once_on_redelivery(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], model: Model
) -> None:
    user_id, receipts = await new_user(sessions, "t:1", "pending"), Receipts()
    receipts.fail = True
    with pytest.raises(RuntimeError):
        await turns.onboard(
            Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5, receipt=receipts)
        )
    # The message is stored; its answer rolled back with the receipt.
    assert await rows(sessions) == [("user", "onboarding", "/start")]
    again = await turns.onboard(
        Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5, receipt=receipts)
    )
    third = await turns.onboard(
        Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5, receipt=receipts)
    )
    assert again is not None and not again.duplicate and again.text == "answer 2"
    assert third is not None and third.duplicate and third.text == "answer 2"
    assert receipts.answers == ["answer 2"] and model.requests == 2
    assert await rows(sessions) == [("user", "onboarding", "/start"), ("assistant", "onboarding", "answer 2")]


async def test_a_chat_turn_whose_model_call_raised_keeps_the_message_and_resumes_it(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], model: Model
) -> None:
    user_id, receipts = await new_user(sessions, "t:3"), Receipts()
    model.fail = ConnectionError("the database went away mid-turn")  # transient: retried, not apologised
    with pytest.raises(ConnectionError):
        await turns.reply(
            Incoming(owner=user_id, text="still there?", sent_at=NOW, telegram_message_id=9, receipt=receipts)
        )
    assert await rows(sessions) == [("user", "text", "still there?")]
    resumed = await turns.reply(
        Incoming(owner=user_id, text="still there?", sent_at=NOW, telegram_message_id=9, receipt=receipts)
    )
    repeated = await turns.reply(
        Incoming(owner=user_id, text="still there?", sent_at=NOW, telegram_message_id=9, receipt=receipts)
    )
    assert not resumed.duplicate and repeated.duplicate and repeated.text == resumed.text == "answer 2"
    assert receipts.answers == ["answer 2"]
    assert [r[0] for r in await rows(sessions)] == ["user", "assistant"]


async def test_a_short_answer_waits_for_the_users_turn_and_is_stored_once(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id, receipts = await new_user(sessions, "t:4"), Receipts()

    def short() -> asyncio.Task[bool]:
        return asyncio.create_task(
            turns.short_answer(
                Incoming(
                    owner=user_id,
                    text="[sticker]",
                    sent_at=NOW,
                    kind="sticker",
                    telegram_message_id=3,
                    receipt=receipts,
                ),
                answer="nice sticker",
            )
        )

    async with turns.frame.serialised(user_id):
        waiting = short()
        await asyncio.sleep(0.3)
        assert not waiting.done() and await rows(sessions) == []
    assert await waiting is True
    assert await short() is False
    assert receipts.answers == ["nice sticker"]
    assert await rows(sessions) == [("user", "sticker", "[sticker]")]
