"""`bench group` plays a busy group's day through the group turn: its figures are measured, not made
up, and what it heard is in the group's transcript with who said it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models import override_allow_model_requests
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select

from agent.core.settings import Settings
from bench.clock import FrozenClock
from bench.group import START, instant_settings, member, plan_day, run_day, run_group_bench
from db.engine import create_engine, session_factory
from db.models import TranscriptMessage, User

pytestmark = pytest.mark.slow


def _noted(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("noted")])


async def test_the_quick_day_prints_real_timings_tokens_and_cache_shares(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The cache share is measured through the Anthropic SDK, against the fake API only.
    with override_allow_model_requests(True):
        await run_group_bench(Settings(_env_file=None), quick=True)
    out = capsys.readouterr().out
    assert "200 messages, 20 addressed to the bot" in out
    timings = re.findall(
        r"sqlite\s+(addressed turn|heard message).*?p50\s+([\d.]+) ms\s+p95\s+([\d.]+) ms", out
    )
    assert [kind for kind, _, _ in timings] == ["addressed turn", "heard message"]
    assert all(0 < float(p50) <= float(p95) for _, p50, p95 in timings)
    context = re.search(
        r"late turns: (\d+) tokens: memory (\d+), history (\d+), note (\d+), heard lines[^\d]+(\d+)",
        out,
    )
    assert context is not None
    total, memory, history, note, heard = (int(n) for n in context.groups())
    # The heard lines are counted with the rest: a late turn carries about nine members' lines.
    assert memory > 0 and history > 0 and note > 0 and heard > 0
    assert abs(total - (memory + history + note + heard)) <= 2  # means, each rounded
    cache = re.search(
        r"first turn ([\d.]+)%; from the second ([\d.]+)% of (\d+) tokens \(lowest turn ([\d.]+)%\); "
        r"billed input ([\d.]+) of uncached",
        out,
    )
    assert cache is not None
    first, later, tokens, lowest, billed = (float(n) for n in cache.groups())
    assert first == 0.0  # nothing was in the cache before the day's first turn
    assert 0 < later < 100 and tokens > 0 and 0 <= lowest <= later
    # Reads at 0.1 and writes at 1.25 or 2: what most turns read makes the whole cheaper than uncached.
    assert 0.1 < billed < 1
    spent = re.search(r"model tokens of the day: ([\d,]+) .*GROUP_DAILY_TOKENS [\d,]+ not reached", out)
    assert spent is not None and int(spent.group(1).replace(",", "")) >= tokens


async def test_the_heard_messages_are_in_the_group_transcript_with_their_speakers(
    database_url: str, engine: Any
) -> None:
    said = plan_day(40, 8)
    day = await run_day(
        database_url,
        instant_settings(database_url),
        FunctionModel(_noted),
        said,
        clock=FrozenClock(current=START),
    )
    reader = create_engine(database_url)
    sessions = session_factory(reader)
    try:
        async with sessions() as session:
            owner = await session.get(User, day.owner_id)
            rows = (
                await session.execute(
                    select(
                        TranscriptMessage.role,
                        TranscriptMessage.speaker_telegram_id,
                        TranscriptMessage.speaker_name,
                    )
                    .where(TranscriptMessage.user_id == day.owner_id)
                    .order_by(TranscriptMessage.id)
                )
            ).all()
    finally:
        await reader.dispose()
    assert owner is not None and owner.kind == "group"
    users = [(who, name) for role, who, name in rows if role == "user"]
    assert users == [(member(s.member).telegram_id, member(s.member).name) for s in said]
    assert sum(role == "assistant" for role, _, _ in rows) == 4  # every tenth message was answered
    assert len(day.heard_ms) == 36 and len(day.addressed_ms) == 1  # the last quarter's one addressed turn
