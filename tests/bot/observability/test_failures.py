"""A turn that fails in the database exports its error's type and redacted description, never the
error's raw text: the driver's error carries the statement's bound values, which hold the person's
words. The collector keeps every event, attribute and status description, so a leak anywhere in a
span (ours or PydanticAI's) would be seen. A context tier that fails says why the same way."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import event
from sqlalchemy.exc import OperationalError
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.account.users import get_or_create_user
from agent.context.builder import ContextBuilder
from agent.context.facts import FactLimits, FunctionFacts
from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from bench.fakes.otlp_receiver import FakeCollector
from bench.fakes.telegram_api import FakeTelegram
from bot.logs import JsonFormatter, TextFormatter
from tests.bot.conftest import running_bot

MARKER = "zebra-marmalade-7731"
ERROR = 2  # OTLP's STATUS_CODE_ERROR
# The writes the driver refuses when they carry the marker: a message stored, a fact saved.
_REFUSED = re.compile(r"\s*INSERT INTO (transcript_messages|user_facts)\b")


@pytest.fixture
def collector() -> Iterator[FakeCollector]:
    with FakeCollector() as fake:
        try:
            yield fake
        finally:
            shutdown()


def _saves_a_fact(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Save a fact holding the marker (its insert fails), then answer."""
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(p.part_kind != "user-prompt" for p in last.parts):
        return ModelResponse(parts=[TextPart("Done.")])
    return ModelResponse(parts=[ToolCallPart("memory_add", {"fact": f"Keeps the {MARKER} in the attic"})])


def _refuse_marked_writes(engine: AsyncEngine) -> None:
    """The driver refuses a write whose bound values hold the marker, as a failing disk would: the
    error SQLAlchemy raises then prints those values under `[parameters: ...]`."""
    dbapi = engine.dialect.loaded_dbapi

    def execute(cursor: Any, statement: str, parameters: Any, context: Any) -> bool:
        if _REFUSED.match(statement) and MARKER in repr(parameters):
            raise dbapi.OperationalError("disk I/O error")
        return False  # not handled here: the driver runs it

    event.listen(engine.sync_engine, "do_execute", execute)


@pytest.mark.both_databases
async def test_a_turn_failing_in_the_database_exports_no_message_text(
    collector: FakeCollector,
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = settings_factory(
        onboarding_enabled=False, otel_exporter_otlp_endpoint=collector.endpoint, embedder="none"
    )
    assert configure(settings)
    async with running_bot(settings, FunctionModel(_saves_a_fact)) as runtime:
        _refuse_marked_writes(runtime.engine)
        tg.user_message(5, f"Write this down: {MARKER}")  # its own insert fails: the row dies
        tg.user_message(5, "remember where the jam is")  # the tool's insert fails
        replies = await tg.wait_for_messages(2, chat_id=5)  # an apology for each
    shutdown()
    assert not [r.text for r in replies if MARKER in r.text]
    # The log lines of the failures, as either format writes them, hold no bound value either.
    failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert failures
    for formatter in (TextFormatter(), JsonFormatter()):
        assert not [r.getMessage()[:80] for r in failures if MARKER in formatter.format(r)]

    spans = collector.spans
    assert [s.name for s in spans if MARKER in s.text()] == []
    # The failures are there, by type and redacted description: the statement, never its values.
    [take] = [s for s in spans if s.name == "turn take" and s.status_code == ERROR]
    assert take.attributes["error.type"] == "OperationalError"
    assert take.status_message.startswith("OperationalError: ")
    assert "disk I/O error" in take.status_message and "[parameters hidden]" in take.status_message
    assert not take.events  # no raw exception event
    assert [s.name for s in spans if s.trace_id == take.trace_id and s.parent_id == ""] == ["inbox update"]
    # PydanticAI's tool span failed too, with the exception's type only (content is off).
    [tool] = [s for s in spans if s.scope == "pydantic-ai" and s.name.endswith("memory_add")]
    assert tool.status_code == ERROR
    assert [e.attributes.get("exception.type", "") for e in tool.events if e.name == "exception"] == [
        "sqlalchemy.exc.OperationalError"
    ]


async def _failing_recall(user_id: int, query: str, limits: FactLimits, now: datetime) -> Sequence[str]:
    """The recall tier's source failing in the database, the person's words in the bound values."""
    statement = "SELECT content FROM user_facts WHERE content LIKE ?"
    raise OperationalError(statement, (query,), Exception("locked"))


async def test_a_failed_tier_says_why_without_the_bound_values(
    collector: FakeCollector, settings_factory: Callable[..., Settings], sessions: Any, clock: Any
) -> None:
    settings = settings_factory(otel_exporter_otlp_endpoint=collector.endpoint, embedder="none")
    assert configure(settings)
    user, _ = await get_or_create_user(sessions, key="cli:cy", now=clock.now(), timezone="UTC", name="Cy")
    builder = ContextBuilder(settings, facts=FunctionFacts(_failing_recall))
    text = f"Remember the {MARKER}"
    built = await builder.build(
        sessions, user=user, conversation=None, text=text, now=clock.now(), previous_message_at=None
    )
    shutdown()
    error = built.snapshot["tiers"]["memory"]["error"]
    assert error.startswith("OperationalError: ") and "[parameters hidden]" in error and MARKER not in error
    tier = next(s for s in collector.spans if s.name == "context tier memory")
    assert tier.attributes["nikita.tier.status"] == "failed"
    assert tier.attributes["nikita.tier.error"] == error
    assert not [s.name for s in collector.spans if MARKER in s.text()]
