"""A turn through the real bot is one OpenTelemetry trace, exported over OTLP/HTTP to a local collector
that decodes the protobuf: the inbox row, the frame's steps, the context tiers, PydanticAI's model
request and tool call, the send; no message text unless asked; the post-processing job a trace of its
own linked to the turn; the metrics pushed beside them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from agent.turn.transcript import Incoming
from bench.fakes.otlp_receiver import FakeCollector, ReceivedSpan
from bench.fakes.telegram_api import FakeTelegram
from db.repositories.conversations import ConversationRepository
from jobs.registry import run_job
from tests.bot.conftest import running_bot

SECRET = "plum pudding at grandma's on the 14th"


def _brain(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Search once for what was said, then answer with it (the text a trace must not carry)."""
    if (
        len(messages) == 1
        or not isinstance(messages[-1], ModelRequest)
        or not any(part.part_kind == "tool-return" for part in messages[-1].parts)
    ):
        return ModelResponse(parts=[ToolCallPart("conversation_search", {"query": SECRET})])
    return ModelResponse(parts=[TextPart(f"You mentioned {SECRET}.")])


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        try:
            yield fake
        finally:
            shutdown()  # before the collector stops: a last export must find it


def _children(spans: list[ReceivedSpan], parent: ReceivedSpan) -> list[str]:
    return sorted(s.name for s in spans if s.parent_id == parent.span_id)


def _one(spans: list[ReceivedSpan], name: str) -> ReceivedSpan:
    found = [s for s in spans if s.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


def _text_of(span: ReceivedSpan) -> str:
    return span.text()  # every attribute, event and status description it carries


async def test_a_turn_is_one_trace_and_its_job_links_back(
    collector: FakeCollector, settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    settings = settings_factory(
        onboarding_enabled=False,
        otel_exporter_otlp_endpoint=collector.endpoint,
        otel_service_name="nikita-test",
    )
    assert configure(settings)
    async with running_bot(settings, FunctionModel(_brain)) as runtime:
        tg.user_message(5, f"Remember: {SECRET}")
        [reply] = await tg.wait_for_messages(1, chat_id=5)
        async with runtime.sessions() as session, session.begin():
            conversations = ConversationRepository(session)
            active = await conversations.active_for(runtime_user := await _user_id(runtime, 5))
            assert active is not None
            await conversations.end_and_queue(active, active.last_message_at)
        counts = await run_job("postprocess", runtime.jobs)
    shutdown()  # flushes the batch of spans and the last metrics
    assert SECRET in reply.text and counts["processed"] == 1

    root = collector.wait_for_span("inbox update")
    spans = collector.trace(root.trace_id)
    assert root.parent_id == "" and root.service == "nikita-test"
    assert {"inbox claim", "turn", "send"} <= set(_children(spans, root))
    turn = _one(spans, "turn")
    assert turn.attributes["nikita.turn.surface"] == "chat"
    assert turn.attributes["nikita.turn.outcome"] == "answered"
    assert turn.attributes["nikita.user.id"] == runtime_user
    assert _children(spans, turn) == ["turn answer", "turn persist", "turn serialise", "turn take"]
    assert _children(spans, _one(spans, "turn take")) == ["turn budgets"]
    answer = _one(spans, "turn answer")
    context = _one(spans, "context")
    assert context.parent_id == answer.span_id
    tiers = {s.attributes["nikita.tier.name"]: s for s in spans if s.name.startswith("context tier ")}
    assert {"time", "profile", "today", "memory"} <= set(tiers)
    assert all(s.parent_id == context.span_id for s in tiers.values())
    assert tiers["time"].attributes["nikita.tier.tokens"] > 0
    assert (
        sum(s.attributes["nikita.tier.tokens"] for s in tiers.values())
        <= context.attributes["nikita.context.total_tokens"]
    )
    # PydanticAI's own instrumentation, under the turn's answer: the run, two model requests, the tool.
    run = next(s for s in spans if s.parent_id == answer.span_id and s.scope == "pydantic-ai")
    requests = [s for s in spans if s.parent_id == run.span_id and s.name.startswith("chat ")]
    tools = [s for s in spans if s.name.endswith("conversation_search") and s.scope == "pydantic-ai"]
    assert len(requests) == 2 and len(tools) == 1
    assert requests[0].attributes["gen_ai.operation.name"] == "chat"
    # Nothing anyone wrote is in the trace: not the message, the tool's query, its results, the answer.
    assert not [s.name for s in spans if "plum pudding" in _text_of(s)]

    # The post-processing job: a trace of its own, linked to the turn that built the context.
    job = collector.wait_for_span("job postprocess")
    assert job.parent_id == "" and job.trace_id != root.trace_id
    assert job.attributes["nikita.conversation.id"] == active.id
    assert (root.trace_id, context.span_id) in job.links

    # The metrics went over OTLP too.
    with collector.arrived:
        assert collector.arrived.wait_for(lambda: collector.points, timeout=10)
    points = collector.points
    [turns] = [p for p in points if p.name == "nikita.turns" and p.attributes["surface"] == "chat"]
    assert turns.value == 1 and turns.attributes["outcome"] == "answered"
    [duration] = [p for p in points if p.name == "nikita.turn.duration" and p.attributes["surface"] == "chat"]
    assert duration.count == 1 and duration.unit == "s"
    calls = {p.attributes["kind"]: p.value for p in points if p.name == "nikita.model.calls"}
    assert calls["chat"] == 2
    assert {p.attributes["job"] for p in points if p.name == "nikita.jobs.runs"} >= {"postprocess"}


async def _user_id(runtime: Any, telegram_id: int) -> int:
    from sqlalchemy import select

    from db.models import User

    async with runtime.sessions() as session:
        found = await session.scalar(select(User.id).where(User.telegram_id == telegram_id))
    assert found is not None
    return int(found)


async def test_content_is_in_the_model_spans_only_when_asked(
    collector: FakeCollector,
    settings_factory: Callable[..., Settings],
    engine: Any,
    sessions: Any,
    clock: Any,
) -> None:
    from agent.account.users import get_or_create_user
    from agent.turn.service import TurnService

    settings = settings_factory(
        otel_exporter_otlp_endpoint=collector.endpoint, telemetry_include_content=True
    )
    assert configure(settings)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    answer = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("Noted.")]))
    service = TurnService(settings=settings, engine=engine, sessions=sessions, clock=clock, model=answer)
    await service.reply(Incoming(owner=user.id, text=f"Remember: {SECRET}", sent_at=clock.now()))
    shutdown()
    turn = collector.wait_for_span("turn")
    spans = collector.trace(turn.trace_id)
    assert turn.parent_id == ""  # no inbox here: the turn is the root
    carrying = {s.scope for s in spans if "plum pudding" in _text_of(s)}
    assert carrying == {"pydantic-ai"}  # the model's spans, never the bot's own
