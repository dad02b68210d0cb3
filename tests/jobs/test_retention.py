"""The `retention` job: old context snapshots go, the newest of each conversation and person stay, the
days are counted into the roll-up first, and what a person sees is unchanged."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic_ai.messages import (
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.usage import RequestUsage
from pydantic_core import to_jsonable_python
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import export_user, forget_user
from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.history.messages import dump_history, load_history
from agent.reports.dashboard import dashboard, percentile
from agent.reports.texts import prompt_report
from bench.clock import FrozenClock
from bot.__main__ import _parser
from bot.cli.jobs import run_jobs_command
from db.models import Conversation, GeneratedPrompt, TurnDay
from db.repositories.prompts import PromptRepository
from jobs.context import JobContext
from jobs.registry import run_job

TELEGRAM_ID = 4242


async def _snapshot(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    conversation_id: int | None,
    at: datetime,
    ms: float,
) -> int:
    async with sessions() as session, session.begin():
        await PromptRepository(session).add(
            user_id=user_id,
            conversation_id=conversation_id,
            message_id=None,
            instructions=f"<profile>instructions of {at.isoformat()}</profile>",
            snapshot={"answered_ms": ms, "total_tokens": 900, "tiers": {}},
            created_at=at,
        )
        return int(await session.scalar(select(func.max(GeneratedPrompt.id))) or 0)


async def _conversation(sessions: async_sessionmaker[AsyncSession], user_id: int, at: datetime) -> int:
    async with sessions() as session, session.begin():
        row = Conversation(
            user_id=user_id, status="processed", started_at=at, last_message_at=at, ended_at=at, messages=[]
        )
        session.add(row)
        await session.flush()
        return row.id


async def _seed(sessions: async_sessionmaker[AsyncSession], now: datetime) -> tuple[int, dict[str, set[int]]]:
    """A person with two old conversations and a recent one, and a voice call's snapshots (no
    conversation) of another person; returns the first person's id and which snapshot ids must stay."""
    ana, _ = await get_or_create_user(
        sessions, key=f"telegram:{TELEGRAM_ID}", now=now - timedelta(days=60), timezone="UTC", name="Ana"
    )
    bo, _ = await get_or_create_user(sessions, key="cli:bo", now=now - timedelta(days=60), timezone="UTC")
    old, older, recent = (now - timedelta(days=days) for days in (40, 35, 1))
    first = await _conversation(sessions, ana.id, old)
    second = await _conversation(sessions, ana.id, older)
    third = await _conversation(sessions, ana.id, recent)
    ids = [
        await _snapshot(sessions, ana.id, first, old + timedelta(minutes=m), 100.0 * (m + 1))
        for m in range(3)
    ]
    ids += [
        await _snapshot(sessions, ana.id, second, older + timedelta(minutes=m), 50.0 + m) for m in range(2)
    ]
    ids += [await _snapshot(sessions, ana.id, third, recent + timedelta(minutes=m), 70.0) for m in range(2)]
    calls = [await _snapshot(sessions, bo.id, None, old + timedelta(hours=h), 10.0) for h in range(2)]
    kept = {ids[2], ids[4], ids[5], ids[6], calls[1]}
    return ana.id, {"kept": kept, "all": {*ids, *calls}, "newest": {ids[6], calls[1]}}


@pytest.mark.both_databases
async def test_retention_keeps_the_newest_snapshots_and_counts_every_day(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, settings: Settings
) -> None:
    now = clock.now()
    ana, ids = await _seed(sessions, now)
    before = await dashboard(sessions, settings, now, days=60)
    shown = await prompt_report(sessions, TELEGRAM_ID)
    exported = await export_user(sessions, ana)
    async with sessions() as session:
        rows = (
            await session.execute(select(GeneratedPrompt.created_at, GeneratedPrompt.context_snapshot))
        ).all()
    expected: dict[str, list[float]] = {}
    for at, snapshot in rows:
        expected.setdefault(at.date().isoformat(), []).append(float(snapshot["answered_ms"]))

    hourly = await run_job("retention", ctx)
    swept = await run_job("retention", ctx, sweep=True)

    async with sessions() as session:
        left = dict((await session.execute(select(GeneratedPrompt.id, GeneratedPrompt.instructions))).all())
        days = {d.day.isoformat(): d for d in (await session.execute(select(TurnDay))).scalars()}
    assert set(left) == ids["kept"]
    assert {i for i, text in left.items() if text} == ids["newest"]  # the rest keep counts, not text
    # The hourly run looks at the last week past the period (the 35-day-old conversation's first
    # snapshot); the sweep at every row.
    assert (hourly["snapshots_deleted"], swept["snapshots_deleted"]) == (
        1,
        len(ids["all"]) - len(ids["kept"]) - 1,
    )
    # Every finished day is in the roll-up with the counts the snapshots had; yesterday is not yet.
    yesterday = (now - timedelta(days=1)).date().isoformat()
    assert {day for day, row in days.items() if row.turns} == set(expected) - {yesterday}
    assert max(days) == (now - timedelta(days=2)).date().isoformat() and len(days) == 40 - 1
    for day, row in ((day, row) for day, row in days.items() if row.turns):
        assert (row.turns, row.timed, row.p95_ms) == (
            len(expected[day]),
            len(expected[day]),
            percentile(expected[day]),
        )
    # The charts and /prompt show what they showed before.
    after = await dashboard(sessions, settings, now, days=60)
    assert after["turns"] == before["turns"] and sum(after["turns"]) == len(ids["all"])
    assert after["p95_turn_ms"] == before["p95_turn_ms"]
    assert await prompt_report(sessions, TELEGRAM_ID) == shown
    assert await export_user(sessions, ana) == exported

    # A second run finds nothing more to do.
    assert await run_job("retention", ctx) == {
        "days_rolled_up": 0,
        "snapshots_deleted": 0,
        "snapshots_slimmed": 0,
        "histories_emptied": 0,
    }
    await forget_user(sessions, ana, now=now)
    async with sessions() as session:
        mine = await session.scalar(
            select(func.count()).select_from(GeneratedPrompt).where(GeneratedPrompt.user_id == ana)
        )
    assert mine == 0  # the roll-up holds counts of days only: nothing of Ana's is left


def _old_form_history(at: datetime) -> list[object]:
    """A history with a tool call, dumped the way every field is written out (nulls and zeros too)."""
    messages = [
        ModelRequest(
            parts=[
                UserPromptPart(["<this_turn>\nNow: Monday\n</this_turn>", "what did I say?"], timestamp=at)
            ]
        ),
        ModelResponse(
            parts=[ToolCallPart("conversation_search", {"query": "flat"}, tool_call_id="c1")],
            usage=RequestUsage(input_tokens=900, output_tokens=12),
            model_name="claude",
            timestamp=at,
        ),
        ModelRequest(
            parts=[ToolReturnPart("conversation_search", "you found a flat", tool_call_id="c1", timestamp=at)]
        ),
        ModelResponse(
            parts=[TextPart("You found a flat near the river.")], model_name="claude", timestamp=at
        ),
    ]
    dumped: list[object] = to_jsonable_python(messages)
    return dumped


@pytest.mark.both_databases
async def test_slimming_a_stored_history_keeps_every_message_as_it_was(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
    raw = _old_form_history(clock.now())
    async with sessions() as session, session.begin():
        closed = Conversation(
            user_id=user.id,
            status="processed",
            started_at=clock.now(),
            last_message_at=clock.now(),
            messages=raw,
        )
        active = Conversation(
            user_id=user.id,
            status="active",
            started_at=clock.now(),
            last_message_at=clock.now(),
            messages=raw,
        )
        session.add_all([closed, active])

    assert await run_job("slim-histories", ctx) == {"histories_emptied": 0, "histories_slimmed": 1}

    async with sessions() as session:
        stored = {c.status: c.messages for c in (await session.execute(select(Conversation))).scalars()}
    assert stored["active"] == raw  # a turn may be appending to it: left to the turn's own rewrite
    slim = stored["processed"]
    assert len(json.dumps(slim)) < 0.8 * len(json.dumps(raw)) and "null" not in json.dumps(slim)
    assert ModelMessagesTypeAdapter.validate_python(slim) == ModelMessagesTypeAdapter.validate_python(raw)
    assert load_history(slim) == load_history(raw) and dump_history(load_history(slim)) == slim
    assert await run_job("slim-histories", ctx) == {"histories_emptied": 0, "histories_slimmed": 0}


async def test_retention_runs_from_the_command_line(
    settings: Settings, sessions: async_sessionmaker[AsyncSession], capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)  # the command runs on the real clock
    _, ids = await _seed(sessions, now)

    args = _parser().parse_args(["jobs", "run", "retention", "--sweep"])
    assert (args.name, args.sweep) == ("retention", True)
    assert await run_jobs_command(settings, args.name, sweep=args.sweep) == 0

    printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert printed["job"] == "retention" and printed["snapshots_deleted"] == len(ids["all"]) - len(
        ids["kept"]
    )
    async with sessions() as session:
        assert set((await session.execute(select(GeneratedPrompt.id))).scalars()) == ids["kept"]


@pytest.mark.both_databases
async def test_model_histories_are_emptied_once_their_conversation_is_past_retention(
    ctx: JobContext, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    now = clock.now()
    user, _ = await get_or_create_user(sessions, key="cli:ana", now=now, timezone="UTC")
    raw = dump_history(load_history(_old_form_history(now)))
    cases = {
        "old": ("processed", 31),
        "recent": ("processed", 29),
        "failed": (
            "failed",
            40,
        ),  # post-processing still to retry: it reads the transcript, yet keep it whole
        "ancient": ("processed", 400),
    }
    ids: dict[str, int] = {}
    async with sessions() as session, session.begin():
        for name, (status, days) in cases.items():
            at = now - timedelta(days=days)
            row = Conversation(
                user_id=user.id, status=status, started_at=at, last_message_at=at, messages=raw
            )
            session.add(row)
            await session.flush()
            ids[name] = row.id

    exported = await export_user(sessions, user.id)
    assert (await run_job("retention", ctx))["histories_emptied"] == 1  # the hourly run: the last week's
    assert (await run_job("retention", ctx, sweep=True))["histories_emptied"] == 1  # after a start: all

    async with sessions() as session:
        stored = {c.id: c.messages for c in (await session.execute(select(Conversation))).scalars()}
    assert {name for name, i in ids.items() if stored[i] == []} == {"old", "ancient"}
    assert stored[ids["recent"]] == raw and stored[ids["failed"]] == raw
    assert await export_user(sessions, user.id) == exported  # the conversations are all still there
    assert (await run_job("retention", ctx))["histories_emptied"] == 0
