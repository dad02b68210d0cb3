"""PERSONA_NAME reaches every prompt; PERSONA_FILE replaces the chat persona or stops the start."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.chat.persona import persona_for
from agent.core.errors import ConfigurationError
from agent.core.settings import Settings, load_settings
from agent.digest.extraction import extract
from agent.digest.summaries import Line, summarise_day
from agent.onboarding.context import OnboardingContext, OnboardingProfile, build_messages
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bot.preflight import check_settings

ROOT = Path(__file__).resolve().parents[2]


def _settings(**values: object) -> Settings:
    return Settings(_env_file=None, model="test", summary_model="test", **values)  # type: ignore[arg-type]


class Recorder:
    """A FunctionModel that keeps the instructions it was sent; a structured output gets `output`."""

    def __init__(self, output: dict[str, object] | None = None) -> None:
        self.instructions: list[str] = []
        self.output = output

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.instructions.append(info.instructions or "")
        if info.output_tools and self.output is not None:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, self.output)])
        return ModelResponse(parts=[TextPart("hello")])


def test_every_prompt_names_the_configured_persona() -> None:
    persona = persona_for(_settings(persona_name="Ada"))
    for prompt in (persona.chat, persona.onboarding, persona.voice):
        assert "You are Ada," in prompt
        assert "Nikita" not in prompt and "{persona_name}" not in prompt
    onboarding = build_messages(
        OnboardingContext(user_id=1, profile=OnboardingProfile(), loaded_at=_now()), "hi", persona
    )
    assert "You are Ada," in str(onboarding[0].parts[0].content)  # type: ignore[union-attr]


def _now() -> datetime:
    return datetime(2026, 11, 24, 9, tzinfo=UTC)


async def test_the_chat_model_is_sent_the_configured_name(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    recorder = Recorder()
    settings = _settings(persona_name="Ada", database_url=str(engine.url))
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(recorder)
    )
    try:
        user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
        await service.reply(Incoming(owner=user.id, text="who are you?", sent_at=clock.now()))
    finally:
        await service.close()
    (instructions,) = recorder.instructions
    assert "You are Ada, a warm" in instructions
    assert "Nikita" not in instructions


async def test_summaries_and_extraction_name_the_persona() -> None:
    settings = _settings(persona_name="Ada")
    lines = [Line(1, "user", "I booked the flight", _now())]
    summary = Recorder({"summary": "A flight was booked."})
    extraction = Recorder({"summary": "A flight.", "tone": "glad"})
    day = await summarise_day(
        FunctionModel(summary), settings, day=date(2026, 11, 24), previous=None, lines=lines
    )
    extracted = await extract(FunctionModel(extraction), settings, lines, [])
    assert (day.summary, extracted.tone) == ("A flight was booked.", "glad")
    for sent in (summary.instructions[0], extraction.instructions[0]):
        assert "Ada" in sent and "Nikita" not in sent


async def test_a_persona_file_replaces_the_chat_persona(
    engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock, tmp_path: Path
) -> None:
    path = tmp_path / "pirate.md"
    path.write_text(
        "# Who you are\n\nYou are {persona_name}, a retired pirate who loves tea.\n", encoding="utf-8"
    )
    recorder = Recorder()
    settings = _settings(persona_name="Ada", persona_file=str(path), database_url=str(engine.url))
    service = TurnService(
        settings=settings, engine=engine, sessions=sessions, clock=clock, model=FunctionModel(recorder)
    )
    try:
        user, _ = await get_or_create_user(sessions, key="cli:ana", now=clock.now(), timezone="UTC")
        await service.reply(Incoming(owner=user.id, text="hi", sent_at=clock.now()))
    finally:
        await service.close()
    assert "You are Ada, a retired pirate who loves tea." in recorder.instructions[0]
    assert "warm, curious and direct" not in recorder.instructions[0]


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_missing_or_empty_persona_file_fails_naming_it(
    content: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "persona.md"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    monkeypatch.setenv("PERSONA_FILE", str(path))
    settings = load_settings()  # read as a path; whether it holds a persona is the start's check
    with pytest.raises(ConfigurationError, match=f"PERSONA_FILE {path} (does not exist|is empty)"):
        check_settings(settings)


@pytest.mark.process
def test_the_command_line_stops_with_one_line(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.md"
    result = subprocess.run(
        [sys.executable, "-m", "bot", "migrate"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(tmp_path),
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PERSONA_FILE": str(missing)},
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"configuration error: PERSONA_FILE {missing} does not exist"]
