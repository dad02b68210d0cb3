"""Every background job is a trace of its own, linked to the traces of the turns it works on, as a
local OTLP collector decodes them: a day's summary to the turns it folds in, a follow-up to its
conversation's turns, a reminder to the turn that set it, post-processing to the conversation's turns."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker
from telegram import Bot

from agent.account.users import get_or_create_user
from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.otlp_receiver import FakeCollector, ReceivedSpan
from bench.fakes.telegram_api import FakeTelegram
from bot.delivery.touchpoints import TelegramMessenger
from db.models import DaySegment, Touchpoint
from db.repositories.conversations import ConversationRepository
from db.repositories.touchpoints import NewTouchpoint, TouchpointRepository
from jobs.context import JobContext
from jobs.day_summary import summarise_segment
from jobs.registry import run_job

pytestmark = pytest.mark.both_databases

TOKEN = "123:ABC"
CHAT = 77


def _brain(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Set the reminder they ask for (in an hour, the clock says 09:00 UTC), then say so."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(p.part_kind == "tool-return" for p in last.parts):
        return ModelResponse(parts=[TextPart("Done, at ten.")])
    return ModelResponse(
        parts=[ToolCallPart("reminder_set", {"text": "call mom", "local_time": "2026-03-03 10:00"})]
    )


@pytest.fixture
def collector(ctx: JobContext) -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        settings = Settings(_env_file=None, otel_exporter_otlp_endpoint=fake.endpoint)  # type: ignore[call-arg]
        assert configure(settings)
        try:
            yield fake
        finally:
            shutdown()


@pytest.fixture
async def delivery(ctx: JobContext) -> AsyncIterator[JobContext]:
    """The job context with the bot's messenger on a fake Bot API."""
    with FakeTelegram(token=TOKEN) as tg:
        async with Bot(TOKEN, base_url=tg.base_url) as bot:
            ctx.messenger = TelegramMessenger(bot)
            yield ctx


def _linked_to(job: ReceivedSpan, turn: ReceivedSpan) -> bool:
    return (
        job.parent_id == "" and job.trace_id != turn.trace_id and turn.trace_id in {t for t, _ in job.links}
    )


async def test_each_job_links_back_to_the_turns_it_works_on(
    collector: FakeCollector,
    delivery: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
) -> None:
    ctx = delivery
    user, _ = await get_or_create_user(
        sessions, key=f"telegram:{CHAT}", now=clock.now(), timezone="UTC", name="Ana", telegram_id=CHAT
    )
    service = TurnService(
        settings=ctx.settings, engine=ctx.engine, sessions=sessions, clock=clock, model=FunctionModel(_brain)
    )
    answer = await service.reply(
        Incoming(owner=user.id, text="Remind me at ten to call mom", sent_at=clock.now())
    )
    assert "ten" in answer.text
    async with sessions() as session:
        segment_id = await session.scalar(select(DaySegment.id).where(DaySegment.user_id == user.id))
        active = await ConversationRepository(session).active_for(user.id)
    assert segment_id is not None and active is not None

    # The day's summary, in-day: linked to the turn whose messages it folds in.
    assert await summarise_segment(ctx, segment_id)
    # A follow-up planned from this conversation (before their message, so it is cancelled unsent).
    async with sessions() as session, session.begin():
        await TouchpointRepository(session).plan(
            user.id,
            active.id,
            "UTC",
            [NewTouchpoint("t-call", "the call with mom", clock.now(), "k-call")],
            at=clock.now() - timedelta(minutes=5),
        )
    first = await run_job("touchpoints", ctx)
    assert first["due"] == 1
    # The conversation closed and post-processed.
    async with sessions() as session, session.begin():
        conversations = ConversationRepository(session)
        active = await conversations.active_for(user.id)
        assert active is not None
        await conversations.end_and_queue(active, active.last_message_at)
    assert (await run_job("postprocess", ctx))["processed"] == 1
    # The reminder the turn set, sent at ten.
    clock.current += timedelta(hours=1)
    second = await run_job("touchpoints", ctx)
    assert second["due"] == 1
    async with sessions() as session:
        statuses = {(k, s) for k, s in await session.execute(select(Touchpoint.kind, Touchpoint.status))}
    shutdown()

    turn = collector.wait_for_span("turn")
    context = next(s for s in collector.trace(turn.trace_id) if s.name == "context")
    for name in ("job day-summary", "job touchpoint", "job reminder", "job postprocess"):
        job = collector.wait_for_span(name)
        assert _linked_to(job, turn), (name, job.links)
        assert (turn.trace_id, context.span_id) in job.links, name
    assert collector.named("job touchpoint")[0].attributes["nikita.conversation.id"] == active.id
    assert collector.named("job day-summary")[0].attributes["nikita.day_segment.id"] == segment_id
    assert collector.named("job reminder")[0].attributes["nikita.touchpoint.outcome"] == "sent"
    assert ("follow_up", "cancelled") in statuses and ("reminder", "sent") in statuses
