"""GET /metrics: a turn's counts and the database's backlog, read back with Prometheus' own text parser;
nothing without the secret."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
from sqlalchemy import func, select
from starlette.applications import Starlette

from agent.account.users import get_or_create_user
from agent.core import observability
from agent.core.observability.setup import configure, shutdown, start_sampler
from agent.core.settings import Settings
from agent.memory.grounding import dropped
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bot.web import metrics
from db.inbox import InboxRepository, NewUpdate
from db.models import ModelUsage
from db.repositories.conversations import ConversationRepository

SECRET = "scrape-me"


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


async def test_metrics_are_prometheus_text_behind_the_secret(
    settings_factory: Callable[..., Settings], engine: Any, sessions: Any, clock: FrozenClock
) -> None:
    # Priced at a model genai-prices knows; the turn itself runs on a local function.
    settings = settings_factory(metrics_secret=SECRET, model="anthropic:claude-haiku-4-5")
    assert configure(settings)
    try:
        user, _ = await get_or_create_user(
            sessions, key="cli:ann", now=clock.now(), timezone="UTC", name="Ann"
        )
        service = TurnService(
            settings=settings,
            engine=engine,
            sessions=sessions,
            clock=clock,
            model=FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("hi!")])),
        )
        result = await service.reply(Incoming(owner=user.id, text="hello there", sent_at=clock.now()))
        # Facts an extraction wrote that did not stand on the person's words (agent/memory/grounding.py).
        dropped(
            ["companion", "outside", "companion"], writer="extraction", owner_id=user.id, conversation_id=None
        )
        now = clock.now()
        async with sessions() as session, session.begin():
            update = {"update_id": 7, "message": {"chat": {"id": 42}, "text": "waiting"}}
            await InboxRepository(session).add(
                [NewUpdate(7, 42, 42, update)], now=now - timedelta(seconds=90)
            )
            conversation = await ConversationRepository(session).active_for(user.id)
            assert conversation is not None and conversation.id == result.conversation_id
            await ConversationRepository(session).end_and_queue(conversation, now - timedelta(minutes=10))
        async with sessions() as session:
            calls, tokens_in, tokens_out = (
                await session.execute(
                    select(
                        func.sum(ModelUsage.calls),
                        func.sum(ModelUsage.input_tokens),
                        func.sum(ModelUsage.output_tokens),
                    )
                )
            ).one()
        # What the messenger counts once Telegram accepted a message the bot wrote first.
        for reminder in (False, False, True):
            observability.touchpoint_sent(reminder=reminder)
        start_sampler(sessions, clock)
        app = Starlette(routes=metrics.routes(settings))
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bot") as client:
            assert (await client.get("/metrics")).status_code == 403
            wrong = await client.get("/metrics", headers={"Authorization": "Bearer nope"})
            assert wrong.status_code == 403
            response = await client.get("/metrics", headers={"Authorization": f"Bearer {SECRET}"})
    finally:
        shutdown()
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    samples = _samples(response.text)

    def value(name: str, **labels: str) -> float:
        matches = [v for (n, got), v in samples.items() if n == name and set(labels.items()) <= got]
        assert matches, (name, labels, sorted({n for n, _ in samples}))
        return sum(matches)

    assert value("nikita_turns_total", surface="chat", outcome="answered") == 1
    assert value("nikita_turn_duration_seconds_count", surface="chat") == 1
    assert value("nikita_model_calls_total", kind="chat") == calls
    assert value("nikita_model_tokens_total", kind="chat", type="input") == tokens_in
    assert value("nikita_model_tokens_total", kind="chat", type="output") == tokens_out
    billed = value("nikita_model_cost_USD_total", kind="chat", pricing="billed")
    assert 0 < billed <= value("nikita_model_cost_USD_total", kind="chat", pricing="uncached")
    assert value("nikita_inbox_depth", status="pending") == 1
    assert value("nikita_inbox_oldest_wait_seconds") == 90
    assert value("nikita_job_lag_seconds", job="postprocess") == 600
    assert value("nikita_job_lag_seconds", job="touchpoints") == 0
    assert value("nikita_facts_dropped_total", writer="extraction", reason="companion") == 2
    assert value("nikita_facts_dropped_total", writer="extraction", reason="outside") == 1
    assert value("nikita_touchpoints_sent_total") == 2
    assert value("nikita_reminders_sent_total") == 1
