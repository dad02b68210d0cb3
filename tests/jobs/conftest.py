"""Fixtures for the job tests: a JobContext on the test database and a scripted SUMMARY_MODEL."""

from __future__ import annotations

import re
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic_ai.exceptions import ModelHTTPError
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.clock import local_day
from agent.core.settings import Settings
from agent.history.turn_notes import words
from bench.clock import FrozenClock
from db.models import Conversation
from db.repositories.day_segments import DaySegmentRepository
from db.repositories.transcript import TranscriptRepository
from jobs.context import JobContext

MARKER = re.compile(r"conversation (\d+)")
USER_LINE = re.compile(r"^\[#(\d+) \d\d:\d\d user\]", re.MULTILINE)


def extraction_reply(**overrides: Any) -> dict[str, Any]:
    """A complete extraction output; tests override fields."""
    reply: dict[str, Any] = {
        "user_facts": ["Ana lives in Lisbon", "Ana plays the cello"],
        "threads_to_open": [
            {"type": "promise", "content": "Nikita promised to ask about the concert"},
            {"type": "question", "content": "Will Ana take the job in Porto?"},
        ],
        "resolved_thread_ids": [],
        "thoughts": ["I wonder how the rehearsal went"],
        "emotional_markers": [{"emotion": "nervous", "intensity": 0.6, "context": "concert"}],
        "key_moments": ["Ana told me about the concert"],
        "summary": "Ana talked about her concert on Friday and a job offer.",
        "tone": "warm",
    }
    reply.update(overrides)
    return reply


def sourced(reply: dict[str, Any], prompt: str) -> dict[str, Any]:
    """The reply with each bare fact sourced on the prompt's first user line, as a careful model
    cites its sources (facts standing on no line of the person's are not stored)."""
    first = [int(m.group(1)) for m in USER_LINE.finditer(prompt)][:1]
    facts = [
        {"text": f, "message_ids": first} if isinstance(f, str) else f for f in reply.get("user_facts", [])
    ]
    return {**reply, "user_facts": facts}


def summary_reply() -> dict[str, Any]:
    """A complete day summary output."""
    return {
        "summary": "Ana prepared for her concert.",
        "goals": ["play the concert well"],
        "decisions": ["practise every evening"],
        "open_loops": ["the job in Porto"],
        "next_steps": ["ask how the concert went"],
        "key_moments": ["concert news", "job offer", "cello", "Lisbon", "rehearsal", "sixth one is cut"],
    }


def _prompt(messages: list[ModelMessage]) -> str:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in message.parts:
                if isinstance(part, UserPromptPart) and (said := words(part)):
                    return said
    return ""


def briefing_reply(**overrides: Any) -> dict[str, Any]:
    """A briefing that passes every check for the extraction_reply's threads; tests override fields."""
    reply: dict[str, Any] = {
        "who": "Ana, a cellist in Lisbon, nervous before her concert on Friday.",
        "today": "She prepared for the concert and is weighing a job offer in Porto.",
        "approach": "Warm and light; let her lead, do not push about the job.",
        "follow_up": ["Ask about the concert", "Will she take the job in Porto?"],
        "left_out": [],
        "voice": "Ana plays the cello in Lisbon. Her concert is on Friday. Ask how she feels about it.",
    }
    reply.update(overrides)
    return reply


class ScriptedSummaries:
    """Plays the extraction, day-summary and briefing models; records every call, fails on demand."""

    def __init__(self) -> None:
        self.extraction = extraction_reply()
        self.briefing = briefing_reply()
        self.briefing_prompts: list[str] = []
        self.fail_briefings = 0
        self.extraction_prompts: list[str] = []
        self.summary_prompts: list[str] = []
        self.model_settings: list[Any] = []
        self.fail_extractions = 0
        self.fail_summaries = 0

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tool = info.output_tools[0]
        prompt = _prompt(messages)
        self.model_settings.append(info.model_settings)
        if "user_facts" in tool.parameters_json_schema.get("properties", {}):
            self.extraction_prompts.append(prompt)
            if self.fail_extractions > 0:
                self.fail_extractions -= 1
                raise ModelHTTPError(status_code=529, model_name="scripted", body="overloaded")
            return ModelResponse(parts=[ToolCallPart(tool.name, sourced(self.extraction, prompt))])
        if "voice" in tool.parameters_json_schema.get("properties", {}):
            self.briefing_prompts.append(prompt)
            if self.fail_briefings > 0:
                self.fail_briefings -= 1
                raise ModelHTTPError(status_code=529, model_name="scripted", body="overloaded")
            return ModelResponse(parts=[ToolCallPart(tool.name, dict(self.briefing))])
        self.summary_prompts.append(prompt)
        if self.fail_summaries > 0:
            self.fail_summaries -= 1
            raise ModelHTTPError(status_code=529, model_name="scripted", body="overloaded")
        return ModelResponse(parts=[ToolCallPart(tool.name, summary_reply())])

    def extractions_per_conversation(self) -> Counter[int]:
        """How many extraction calls named each conversation marker."""
        return Counter(int(m.group(1)) for p in self.extraction_prompts if (m := MARKER.search(p)))


@pytest.fixture
def scripted() -> ScriptedSummaries:
    """The scripted summary model's behaviour and records."""
    return ScriptedSummaries()


@pytest.fixture
def settings(database_url: str) -> Settings:
    """Settings on the test database, independent of any .env."""
    return Settings(_env_file=None, database_url=database_url, summary_model="test", model="test")  # type: ignore[call-arg]


@pytest.fixture
def ctx(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    clock: FrozenClock,
    scripted: ScriptedSummaries,
) -> JobContext:
    """A job context with the scripted model and a frozen clock."""
    return JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        summary_model=FunctionModel(scripted),
        worker_id="worker-a",
    )


async def seed_conversation(
    sessions: async_sessionmaker[AsyncSession],
    *,
    start: datetime,
    texts: list[str],
    user_key: str = "cli:ana",
    timezone: str = "UTC",
    status: str = "closed",
    step: timedelta = timedelta(minutes=1),
) -> tuple[int, int]:
    """A user's conversation with its transcript and day segments, as the turn stores them."""
    user, _ = await get_or_create_user(sessions, key=user_key, now=start, timezone=timezone, name="Ana")
    last = start + step * (len(texts) - 1)
    async with sessions() as session, session.begin():
        conversation = Conversation(
            user_id=user.id,
            status=status,
            started_at=start,
            last_message_at=last,
            ended_at=last if status != "active" else None,
            messages=[],
            message_count=len(texts),
        )
        session.add(conversation)
        await session.flush()
        for i, text in enumerate(texts):
            at = start + step * i
            segment = await DaySegmentRepository(session).open(user.id, local_day(at, timezone), timezone, at)
            message = await TranscriptRepository(session).add(
                user_id=user.id,
                conversation_id=conversation.id,
                role="user" if i % 2 == 0 else "assistant",
                content=text,
                sent_at=at,
                day_segment_id=segment.id,
            )
            DaySegmentRepository.record_message(segment, message.id, at)
        return user.id, conversation.id
