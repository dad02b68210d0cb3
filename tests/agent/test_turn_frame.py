"""The turn frame's guarantees, for every surface that plugs into it: one turn of a user at a time,
a message stored before the answer and answered once however often it is delivered, the daily
budgets refusing onboarding like chat (each refusal counted once), and a repeat given back the
answer stored the first time, for its caller to send."""

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
from agent.turn.short_answer import ShortReply
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
    for _ in range(2):  # the second time a repeat: its refusal given back, not counted again
        refused = await turns.onboard(Incoming(owner=pending, text="hi", sent_at=NOW, telegram_message_id=1))
        chat = await turns.reply(Incoming(owner=done, text="hello", sent_at=NOW, telegram_message_id=1))
        assert refused is not None and refused.text == chat.text == CAP_REPLY
    assert refused is not None and refused.duplicate and chat.duplicate
    assert model.requests == 0
    assert ("user", "onboarding", "hi") in await rows(sessions)
    assert ("user", "text", "hello") in await rows(sessions)
    async with sessions() as session:
        counts = await AccessRepository(session).counts(NOW.date())
    assert counts[COUNTERS["user"]] == 2


async def test_an_onboarding_turn_cut_short_is_answered_once_on_redelivery(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], model: Model
) -> None:
    user_id = await new_user(sessions, "t:1", "pending")
    model.fail = asyncio.CancelledError()  # the process stops mid-turn: no answer is stored
    with pytest.raises(asyncio.CancelledError):
        await turns.onboard(Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5))
    assert await rows(sessions) == [("user", "onboarding", "/start")]
    again = await turns.onboard(Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5))
    # Answered, but its caller did not send it (say its process stopped): the same answer again.
    third = await turns.onboard(Incoming(owner=user_id, text="/start", sent_at=NOW, telegram_message_id=5))
    assert again is not None and not again.duplicate and again.text == "answer 2"
    assert third is not None and third.duplicate and third.text == "answer 2"
    assert model.requests == 2
    assert await rows(sessions) == [("user", "onboarding", "/start"), ("assistant", "onboarding", "answer 2")]


async def test_a_chat_turn_whose_model_call_raised_keeps_the_message_and_resumes_it(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession], model: Model
) -> None:
    user_id = await new_user(sessions, "t:3")
    model.fail = ConnectionError("the database went away mid-turn")  # transient: retried, not apologised
    said = Incoming(owner=user_id, text="still there?", sent_at=NOW, telegram_message_id=9)
    with pytest.raises(ConnectionError):
        await turns.reply(said)
    assert await rows(sessions) == [("user", "text", "still there?")]
    resumed = await turns.reply(said)
    repeated = await turns.reply(said)
    assert not resumed.duplicate and repeated.duplicate and repeated.text == resumed.text == "answer 2"
    assert model.requests == 2
    assert [r[0] for r in await rows(sessions)] == ["user", "assistant"]


async def test_a_short_answer_waits_for_the_users_turn_and_is_stored_once(
    turns: TurnService, sessions: async_sessionmaker[AsyncSession]
) -> None:
    user_id = await new_user(sessions, "t:4")

    def short() -> asyncio.Task[ShortReply]:
        return asyncio.create_task(
            turns.short_answer(
                Incoming(
                    owner=user_id,
                    text="[sticker]",
                    sent_at=NOW,
                    kind="sticker",
                    telegram_message_id=3,
                ),
                answer="nice sticker",
            )
        )

    async with turns.frame.serialised(user_id):
        waiting = short()
        await asyncio.sleep(0.3)
        assert not waiting.done() and await rows(sessions) == []
    assert await waiting == ShortReply("nice sticker")
    # Delivered again (its first reply never sent): stored once, the same reply to send.
    assert await short() == ShortReply("nice sticker", duplicate=True)
    assert await rows(sessions) == [("user", "sticker", "[sticker]")]
