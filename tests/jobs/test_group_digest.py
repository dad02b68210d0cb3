"""A group chat's post-processing: its prompts speak of a group and its members by name, and read
each member's line with that member's name; a person's prompts stay exactly as they were."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.groups import group_owner
from agent.chat.persona import with_name
from agent.context.briefing.writer import briefing_instructions
from agent.core.clock import local_day
from agent.digest.extraction import EXTRACTION_INSTRUCTIONS
from agent.digest.groups import GROUP_PREFACE
from agent.digest.summaries import SUMMARY_INSTRUCTIONS
from bench.clock import FrozenClock
from db.models import Conversation, DaySegment
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.day_summaries import DaySummaryRepository
from db.repositories.transcript import TranscriptRepository
from jobs.context import JobContext
from jobs.registry import run_job
from tests.jobs.conftest import ScriptedSummaries, seed_conversation

pytestmark = pytest.mark.both_databases

# (speaker, Telegram id, text); None speaks for the bot.
GROUP_LINES = [
    ("Ana", 7, "picnic on Saturday? I'll bring my cello"),
    ("Ben", 8, "I can't, my sister is visiting"),
    (None, None, "Ana, a cello at a picnic sounds lovely"),
]


class Recorded:
    """The scripted summary models, recording each request's instructions and prompt by kind."""

    def __init__(self, scripted: ScriptedSummaries) -> None:
        self.scripted = scripted
        self.calls: list[tuple[str, str, str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        properties = info.output_tools[0].parameters_json_schema.get("properties", {})
        kind = "extraction" if "user_facts" in properties else "briefing" if "voice" in properties else "day"
        prompt = "".join(str(p.content) for p in request.parts if p.part_kind == "user-prompt")
        # The instructions as given (pydantic-ai sends them without their closing newline).
        self.calls.append((kind, (request.instructions or "") + "\n", prompt))
        return self.scripted(messages, info)

    def of(self, kind: str, *, containing: str) -> list[tuple[str, str]]:
        """(instructions, prompt) of the calls of this kind whose prompt holds `containing`."""
        return [(i, p) for k, i, p in self.calls if k == kind and containing in p]


async def _group_conversation(sessions: async_sessionmaker[AsyncSession], start: datetime) -> tuple[int, int]:
    group, _ = await group_owner(sessions, chat_id=-100_555, title="Picnic club", now=start, timezone="UTC")
    last = start + timedelta(minutes=len(GROUP_LINES) - 1)
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=group.id,
            status="closed",
            started_at=start,
            last_message_at=last,
            ended_at=last,
            messages=[],
            message_count=len(GROUP_LINES),
        )
        session.add(conversation)
        await session.flush()
        for i, (name, telegram_id, text) in enumerate(GROUP_LINES):
            at = start + timedelta(minutes=i)
            segment = await DaySegmentRepository(session).open(group.id, local_day(at, "UTC"), "UTC", at)
            message = await TranscriptRepository(session).add(
                user_id=group.id,
                conversation_id=conversation.id,
                role="assistant" if name is None else "user",
                content=text,
                sent_at=at,
                day_segment_id=segment.id,
                speaker_telegram_id=telegram_id,
                speaker_name=name,
            )
            DaySegmentRepository.record_message(segment, message.id, at)
        return group.id, segment.id


async def test_a_groups_prompts_name_its_members_and_a_persons_are_unchanged(
    ctx: JobContext,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> None:
    recorded = Recorded(scripted)
    ctx.summary_model = FunctionModel(recorded)
    ctx.settings.context_engine = "v2"  # briefings are written too
    name = ctx.settings.persona_name
    await seed_conversation(sessions, start=clock.now(), texts=["my concert is on Friday", "good luck!"])
    group_id, group_day = await _group_conversation(sessions, clock.now())

    assert (await run_job("postprocess", ctx))["processed"] == 2

    preface = with_name(GROUP_PREFACE, name)
    # The person's: the very instructions they had before groups existed.
    ((extraction, prompt),) = recorded.of("extraction", containing="my concert is on Friday")
    assert extraction == with_name(EXTRACTION_INSTRUCTIONS, name)
    assert "] my concert is on Friday" in prompt
    ((day, _),) = recorded.of("day", containing="my concert is on Friday")
    assert day == with_name(SUMMARY_INSTRUCTIONS, name)
    # One briefing each: the person's as it was, the group's with the preface (below).
    briefings = [i for k, i, _ in recorded.calls if k == "briefing"]
    assert len(briefings) == 2 and briefing_instructions(ctx.settings) in briefings
    # The group's: the same instructions after a preface about members, and every line named.
    ((extraction, prompt),) = recorded.of("extraction", containing="picnic on Saturday")
    assert extraction == preface + with_name(EXTRACTION_INSTRUCTIONS, name)
    assert "group chat" in extraction and '"Ana plays the cello"' in extraction
    for speaker, _, text in GROUP_LINES[:2]:
        assert f" user] {speaker}: {text}" in prompt
    assert f" assistant] {GROUP_LINES[2][2]}" in prompt
    ((day, prompt),) = recorded.of("day", containing="picnic on Saturday")
    assert day == preface + with_name(SUMMARY_INSTRUCTIONS, name)
    assert "user] Ben: I can't, my sister is visiting" in prompt
    assert preface + briefing_instructions(ctx.settings) in briefings
    assert briefing_instructions(ctx.settings, group=True) == preface + briefing_instructions(ctx.settings)

    # A rewrite of the group's day, asked for like any other, reads the names too.
    recorded.calls.clear()
    async with sessions() as session, session.begin():
        segment = await session.scalar(select(DaySegment).where(DaySegment.id == group_day))
        assert segment is not None and segment.user_id == group_id
        await DaySummaryRepository(session).request_regeneration(segment.id, clock.now())
    await run_job("day-summaries", ctx)
    ((day, prompt),) = recorded.of("day", containing="picnic on Saturday")
    assert day == preface + with_name(SUMMARY_INSTRUCTIONS, name)
    assert "user] Ana: picnic on Saturday? I'll bring my cello" in prompt
