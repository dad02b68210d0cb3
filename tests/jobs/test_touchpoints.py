"""Delivering follow-ups: real python-telegram-bot and Anthropic SDK against the fakes, both databases."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.anthropic import AnthropicModel
from pydantic_ai.providers.anthropic import AnthropicProvider
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.fakes.anthropic_api import FakeAnthropic, Reply
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import FOLLOWUPS_OFF, TelegramMessenger
from db.models import Conversation, ConversationThread, ModelUsage, Touchpoint, TranscriptMessage, User
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from jobs.context import JobContext
from jobs.registry import run_job

pytestmark = pytest.mark.both_databases

TOKEN = "123:ABC"
FRIDAY_3PM_PARIS = datetime(2026, 3, 6, 14, 0, tzinfo=UTC)


class Composer:
    """The fake API's behaviour for the composition agent: counts calls, sends or declines."""

    def __init__(self) -> None:
        self.calls = 0
        self.send = True
        self.text = "Hey! How did the interview go?"
        self.systems: list[str] = []
        self.lock = threading.Lock()
        self.gate: threading.Event | None = None  # set: the answer waits for it
        self.asked = threading.Event()  # set at the first call

    def __call__(self, body: dict[str, Any]) -> Reply:
        tool = body["tools"][0]
        assert "send" in tool["input_schema"]["properties"]
        with self.lock:
            self.calls += 1
            system = body.get("system")
            blocks = [system] if isinstance(system, str) else [b["text"] for b in system or []]
            self.systems.append("\n".join(blocks))
        self.asked.set()
        if self.gate is not None:
            self.gate.wait(10)
        return Reply.tool_call(tool["name"], {"send": self.send, "text": self.text if self.send else ""})


@dataclass
class _Step:
    seconds: float
    go: asyncio.Event = field(default_factory=asyncio.Event)


class _Steps:
    """A job's `sleep` that returns when the test lets it: each wait is queued for the test to release."""

    def __init__(self) -> None:
        self.waiting: asyncio.Queue[_Step] = asyncio.Queue()

    async def sleep(self, seconds: float) -> None:
        """Wait until the test sets this step's `go`."""
        step = _Step(seconds)
        await self.waiting.put(step)
        await step.go.wait()

    async def next(self) -> _Step:
        """The next wait the job began."""
        return await asyncio.wait_for(self.waiting.get(), 30)


@pytest.fixture
def composer() -> Iterator[tuple[FakeAnthropic, Composer]]:
    behaviour = Composer()
    with FakeAnthropic(responder=behaviour) as server:
        yield server, behaviour


@pytest.fixture
def tg() -> Iterator[FakeTelegram]:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
async def delivery(
    ctx: JobContext, tg: FakeTelegram, composer: tuple[FakeAnthropic, Composer]
) -> AsyncIterator[JobContext]:
    """The job context with the Anthropic chat model and the bot's messenger on the fakes."""
    server, _ = composer
    provider = AnthropicProvider(api_key="sk-fake", base_url=server.base_url)
    ctx.chat_model = AnthropicModel("claude-sonnet-4-6", provider=provider)
    # The Anthropic SDK talks to the local fake: the one kind of model request these tests allow.
    with override_allow_model_requests(True):
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            ctx.messenger = TelegramMessenger(bot)
            yield ctx


async def _user(
    sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, telegram_id: int, timezone: str
) -> int:
    user, _ = await get_or_create_user(
        sessions,
        key=f"telegram:{telegram_id}",
        now=clock.now(),
        timezone=timezone,
        name="Ana",
        telegram_id=telegram_id,
    )
    async with sessions() as session, session.begin():
        await session.execute(
            User.__table__.update().where(User.id == user.id).values(last_message_at=clock.now())
        )
    return user.id


async def _plan(
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    user_id: int,
    due_at: datetime,
    *,
    reason: str = "Ana's interview on Thursday",
    timezone: str = "Europe/Paris",
) -> int:
    async with sessions() as session, session.begin():
        thread = ConversationThread(
            user_id=user_id,
            type="follow_up",
            content=reason,
            dedupe_key=f"t-{reason}",
            created_at=clock.now(),
        )
        session.add(thread)
        await session.flush()
        await TouchpointRepository(session).plan(
            user_id,
            None,
            timezone,
            [NewTouchpoint(thread.dedupe_key, reason, due_at, f"k-{reason}")],
            at=clock.now() + timedelta(minutes=1),
        )
        return int(await session.scalar(select(Touchpoint.id).where(Touchpoint.reason == reason)) or 0)


async def _row(sessions: async_sessionmaker[AsyncSession], touchpoint_id: int) -> Touchpoint:
    async with sessions() as session:
        row = await session.get(Touchpoint, touchpoint_id)
        assert row is not None
        return row


async def test_the_thursday_plan_is_sent_once_on_friday_at_three_local(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    _, behaviour = composer
    user_id = await _user(sessions, clock, 501, "Europe/Paris")
    touchpoint_id = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS)

    clock.current = FRIDAY_3PM_PARIS - timedelta(minutes=1)
    assert await run_job("touchpoints", delivery) == {"due": 0}
    assert behaviour.calls == 0  # nothing due: no model call

    clock.current = FRIDAY_3PM_PARIS
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    clock.advance(timedelta(minutes=1))
    assert await run_job("touchpoints", delivery) == {"due": 0}

    (sent,) = tg.messages_to(501)
    assert sent.text == "Hey! How did the interview go?"
    assert FOLLOWUPS_OFF in str(sent.params.get("reply_markup"))
    assert behaviour.calls == 1
    # The persona's rules and the reason reach the model; the user's context tiers too.
    assert "no guilt" in behaviour.systems[0] and "Ana's interview on Thursday" in behaviour.systems[0]
    assert "Friday 2026-03-06 15:00 (Europe/Paris)" in behaviour.systems[0]
    row = await _row(sessions, touchpoint_id)
    assert (row.status, row.chunks_sent, row.sent_at) == ("sent", 1, FRIDAY_3PM_PARIS)
    async with sessions() as session:
        message = await session.get(TranscriptMessage, row.transcript_message_id)
        assert message is not None
        assert (message.role, message.kind, message.content) == ("assistant", "proactive", sent.text)
        conversation = await session.get(Conversation, message.conversation_id)
        assert conversation is not None and (conversation.kind, conversation.status) == (
            "proactive",
            "active",
        )

    # The conversation it opened waits TOUCHPOINT_REPLY_WINDOW_HOURS for the answer, not 15 minutes;
    # unanswered, it closes, and post-processing finds nothing the user said (no model call).
    clock.current = FRIDAY_3PM_PARIS + timedelta(hours=3)
    assert await run_job("close-idle-conversations", delivery) == {"closed": 0}
    clock.current = FRIDAY_3PM_PARIS + timedelta(hours=24, minutes=1)
    assert await run_job("close-idle-conversations", delivery) == {"closed": 1}
    assert await run_job("postprocess", delivery) == {"claimed": 1, "processed": 1, "failed": 0}
    assert behaviour.calls == 1


async def test_quiet_hours_follow_each_users_zone(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
) -> None:
    at = datetime(2026, 3, 6, 6, 0, tzinfo=UTC)  # 07:00 in Paris (quiet), 15:00 in Tokyo
    paris = await _user(sessions, clock, 601, "Europe/Paris")
    tokyo = await _user(sessions, clock, 602, "Asia/Tokyo")
    paris_plan = await _plan(sessions, clock, paris, at, reason="Paris plan")
    await _plan(sessions, clock, tokyo, at, reason="Tokyo plan", timezone="Asia/Tokyo")
    clock.current = at
    assert await run_job("touchpoints", delivery) == {"due": 2, "sent": 1, "postponed_quiet_hours": 1}
    assert len(tg.messages_to(602)) == 1 and tg.messages_to(601) == []
    row = await _row(sessions, paris_plan)
    assert (row.status, row.due_at) == ("planned", datetime(2026, 3, 6, 8, 0, tzinfo=UTC))  # 09:00 Paris
    clock.current = row.due_at
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    assert len(tg.messages_to(601)) == 1


async def test_a_resolved_thread_or_a_message_since_cancels_without_a_model_call(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    resolved_user = await _user(sessions, clock, 701, "UTC")
    wrote_user = await _user(sessions, clock, 702, "UTC")
    resolved = await _plan(sessions, clock, resolved_user, FRIDAY_3PM_PARIS, reason="resolved one")
    wrote = await _plan(sessions, clock, wrote_user, FRIDAY_3PM_PARIS, reason="wrote one")
    async with sessions() as session, session.begin():
        row = await session.get(Touchpoint, resolved)
        assert row is not None and row.thread_id is not None
        thread = await session.get(ConversationThread, row.thread_id)
        assert thread is not None
        thread.status = "resolved"
        user = await session.get(User, wrote_user)
        assert user is not None
        user.last_message_at = clock.now() + timedelta(hours=2)
    clock.current = FRIDAY_3PM_PARIS
    counts = await run_job("touchpoints", delivery)
    assert counts == {"due": 2, "cancelled_thread_resolved": 1, "cancelled_user_wrote": 1}
    assert tg.sent == [] and composer[1].calls == 0
    assert (await _row(sessions, wrote)).outcome == "user_wrote"


async def test_unanswered_means_no_second_and_a_decline_sends_nothing(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    user_id = await _user(sessions, clock, 801, "UTC")
    await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS, reason="first")
    second = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS + timedelta(days=1), reason="second")
    clock.current = FRIDAY_3PM_PARIS
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    clock.current = FRIDAY_3PM_PARIS + timedelta(days=1)
    assert await run_job("touchpoints", delivery) == {"due": 1, "cancelled_unanswered": 1}
    assert (await _row(sessions, second)).status == "cancelled"
    assert len(tg.messages_to(801)) == 1

    other = await _user(sessions, clock, 802, "UTC")
    declined = await _plan(sessions, clock, other, clock.now(), reason="declined one")
    composer[1].send = False
    assert await run_job("touchpoints", delivery) == {"due": 1, "declined": 1}
    assert tg.messages_to(802) == []
    assert (await _row(sessions, declined)).status == "declined"


async def test_a_blocked_user_is_marked_unreachable_and_skipped(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    user_id = await _user(sessions, clock, 901, "UTC")
    blocked = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS, reason="first")
    later = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS + timedelta(days=2), reason="later")
    tg.fail_next("sendMessage", error_code=403, description="Forbidden: bot was blocked by the user")
    clock.current = FRIDAY_3PM_PARIS
    assert await run_job("touchpoints", delivery) == {"due": 1, "undeliverable": 1}
    row = await _row(sessions, blocked)
    assert (row.status, row.outcome) == ("undeliverable", "blocked")
    async with sessions() as session:
        user = await session.get(User, user_id)
        assert user is not None and user.unreachable_at == FRIDAY_3PM_PARIS
        # What never reached them is not in their transcript.
        assert (
            await session.scalar(select(TranscriptMessage).where(TranscriptMessage.kind == "proactive"))
        ) is None
    clock.current = FRIDAY_3PM_PARIS + timedelta(days=2)
    assert await run_job("touchpoints", delivery) == {"due": 1, "cancelled_unreachable": 1}
    assert (await _row(sessions, later)).outcome == "unreachable"
    assert composer[1].calls == 1


async def test_without_a_sender_nothing_is_leased(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, settings: Settings
) -> None:
    user_id = await _user(sessions, clock, 1001, "UTC")
    planned = await _plan(sessions, clock, user_id, clock.now())
    assert await run_job("touchpoints", ctx) == {"due": 0, "no_sender": 1}
    assert (await _row(sessions, planned)).status == "planned"


async def test_a_quiet_user_gets_one_check_in_on_their_best_thread_when_turned_on(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    user_id = await _user(sessions, clock, 1101, "UTC")
    async with sessions() as session, session.begin():
        for kind, content in (("topic", "jazz records"), ("promise", "send Ana the recipe")):
            session.add(
                ConversationThread(
                    user_id=user_id, type=kind, content=content, dedupe_key=content, created_at=clock.now()
                )
            )
    clock.advance(timedelta(days=3, hours=1))
    assert await run_job("touchpoints", delivery) == {"due": 0}  # off by default

    delivery.settings = delivery.settings.model_copy(update={"touchpoint_check_in_days": 3})
    assert await run_job("touchpoints", delivery) == {"check_ins_planned": 1, "due": 1, "sent": 1}
    assert "send Ana the recipe" in composer[1].systems[0]  # a promise ranks above a topic
    clock.advance(timedelta(days=1))
    assert await run_job("touchpoints", delivery) == {"due": 0}  # one per quiet spell
    assert len(tg.messages_to(1101)) == 1


async def test_a_user_over_the_daily_token_cap_waits_for_the_next_utc_day(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    user_id = await _user(sessions, clock, 1201, "UTC")
    planned = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS)
    clock.current = FRIDAY_3PM_PARIS
    async with sessions() as session, session.begin():
        session.add(
            ModelUsage(
                user_id=user_id,
                day=clock.now().date(),
                kind="chat",
                calls=1,
                input_tokens=50,
                output_tokens=0,
            )
        )
    delivery.settings = delivery.settings.model_copy(update={"user_daily_tokens": 40})
    assert await run_job("touchpoints", delivery) == {"due": 1, "postponed_budget": 1}
    assert (await _row(sessions, planned)).due_at == datetime(2026, 3, 7, tzinfo=UTC)
    assert composer[1].calls == 0


async def test_a_refused_send_is_resumed_later_without_a_second_model_call(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    user_id = await _user(sessions, clock, 1301, "UTC")
    planned = await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS)
    tg.fail_next("sendMessage", error_code=500, description="Internal Server Error")
    clock.current = FRIDAY_3PM_PARIS
    assert await run_job("touchpoints", delivery) == {"due": 1, "retry": 1}
    assert (await _row(sessions, planned)).status == "sending"  # the text is recorded
    clock.advance(timedelta(minutes=6))
    assert await run_job("touchpoints", delivery) == {"due": 1, "sent": 1}
    assert [m.text for m in tg.messages_to(1301)] == [composer[1].text]
    assert composer[1].calls == 1


async def test_a_slow_composition_keeps_its_lease_so_a_second_worker_does_not_compose_it_again(
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    tg: FakeTelegram,
    composer: tuple[FakeAnthropic, Composer],
) -> None:
    _, behaviour = composer
    user_id = await _user(sessions, clock, 511, "Europe/Paris")
    await _plan(sessions, clock, user_id, FRIDAY_3PM_PARIS)
    clock.current = FRIDAY_3PM_PARIS
    lease = 60.0
    renewals = _Steps()
    first = replace(
        delivery,
        settings=delivery.settings.model_copy(update={"touchpoint_lease_seconds": lease}),
        sleep=renewals.sleep,
    )
    second = replace(first, worker_id="another-instance")

    behaviour.gate = threading.Event()
    composing = asyncio.create_task(run_job("touchpoints", first))
    assert await asyncio.to_thread(behaviour.asked.wait, 10)
    # The model takes longer than three leases; the clock moves on while the first worker waits
    # (each step under one lease, and a renewal, every third of a lease, between two steps).
    step = await renewals.next()
    for _ in range(4):
        assert step.seconds == lease / 3
        clock.advance(timedelta(seconds=lease * 0.9))
        step.go.set()
        step = await renewals.next()  # renewed: the keeper waits for its next turn
    assert await run_job("touchpoints", second) == {"due": 0}
    behaviour.gate.set()
    assert await composing == {"due": 1, "sent": 1}

    assert behaviour.calls == 1
    assert [m.text for m in tg.messages_to(511)] == ["Hey! How did the interview go?"]
