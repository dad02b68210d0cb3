"""Log lines inside a traced turn carry its ids where Cloud Logging and log drains look for them; with
nothing configured, a turn runs without the OpenTelemetry SDK ever being imported."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from agent.core import observability
from agent.core.observability.setup import configure, shutdown
from agent.core.settings import Settings
from bench.fakes.otlp_receiver import FakeCollector
from bot.logs import configure_logging

ROOT = Path(__file__).resolve().parents[3]


def test_json_and_text_lines_name_the_span_they_were_logged_in(tmp_path: Path) -> None:
    root = logging.getLogger()
    level, handlers = root.level, list(root.handlers)
    lines, plain = io.StringIO(), io.StringIO()
    with FakeCollector() as collector:
        settings = Settings(
            _env_file=None, otel_exporter_otlp_endpoint=collector.endpoint, google_cloud_project="my-proj"
        )
        try:
            assert configure(settings)
            configure_logging("INFO", log_format="json", stream=lines)
            text_handler = logging.StreamHandler(plain)
            from bot.logs import TextFormatter

            text_handler.setFormatter(TextFormatter())
            root.addHandler(text_handler)
            log = logging.getLogger("nikita.test.trace")
            log.info("outside any span")
            with observability.span("turn"):
                log.warning("model call failed", extra={"user_id": 7})
        finally:
            shutdown()
            root.handlers[:] = handlers
            root.setLevel(level)
        exported = collector.wait_for_span("turn")
    outside, inside = (json.loads(line) for line in lines.getvalue().splitlines())
    assert "logging.googleapis.com/trace" not in outside and "trace_id" not in outside
    assert inside["logging.googleapis.com/trace"] == f"projects/my-proj/traces/{exported.trace_id}"
    assert inside["logging.googleapis.com/spanId"] == exported.span_id == inside["span_id"]
    assert inside["logging.googleapis.com/trace_sampled"] is True
    assert inside["trace_id"] == exported.trace_id and inside["severity"] == "WARNING"
    text_lines = plain.getvalue().splitlines()
    assert "trace_id" not in text_lines[0]
    assert f"trace_id={exported.trace_id} span_id={exported.span_id}" in text_lines[1]


OFF = """
import asyncio, sys
from datetime import UTC, datetime
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models.function import FunctionModel
import bot.app, bot.__main__, jobs.registry
from agent.account.users import get_or_create_user
from agent.core.observability.setup import configure
from agent.core.settings import Settings
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from db.base import Base
from db.engine import create_engine, session_factory

async def main():
    settings = Settings(_env_file=None, database_url=sys.argv[1], model="test", summary_model="test")
    assert not configure(settings)
    engine = create_engine(settings.database_url)
    async with engine.begin() as conn:
        await conn.run_sync(Base.metadata.create_all)
    sessions = session_factory(engine)
    now = datetime(2026, 1, 5, 9, tzinfo=UTC)
    user, _ = await get_or_create_user(sessions, key="cli:off", now=now, timezone="UTC", name="Off")
    model = FunctionModel(lambda messages, info: ModelResponse(parts=[TextPart("hi")]))
    service = TurnService(settings=settings, engine=engine, sessions=sessions, model=model)
    assert (await service.reply(Incoming(owner=user.id, text="hello", sent_at=now))).text == "hi"
    await engine.dispose()
    sdk = ("opentelemetry.sdk", "opentelemetry.exporter", "prometheus_client")
    print(sorted(name for name in sys.modules if name.startswith(sdk)))

asyncio.run(main())
"""


@pytest.mark.process
def test_off_by_default_a_turn_loads_no_sdk(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/off.db"
    done = subprocess.run(
        [sys.executable, "-c", OFF, url], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"
