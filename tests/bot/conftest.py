"""The bot end to end: the real python-telegram-bot against the fake Bot API, a scripted model."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models import Model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from agent.history.turn_notes import words
from bench.fakes.telegram_api import FakeTelegram
from bot.app import AnyApplication, build_application, running
from bot.runtime import Runtime, build_runtime
from db.models import TranscriptMessage

TOKEN = "123:ABC"
ADMIN = 999


def _said(part: object) -> str:
    """A user prompt's words; '' for a change to the conversation's package, which is a user prompt
    too (`<system>`-tagged, sent before the words of its turn: agent/chat/changes.py) but nobody's
    words, and comes whenever a tier that timed out on a loaded machine comes back."""
    if not isinstance(part, UserPromptPart):
        return ""
    said = words(part)
    return "" if said.startswith("<system>") else said


def last_user_text(messages: list[ModelMessage]) -> str:
    """The newest user prompt in a request list."""
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            for part in reversed(message.parts):
                if said := _said(part):
                    return said
    return ""


def user_prompts(messages: list[ModelMessage]) -> list[str]:
    """Every user prompt in a request list, oldest first."""
    return [said for m in messages if isinstance(m, ModelRequest) for p in m.parts if (said := _said(p))]


# How long the first turn of each of two chats waits for a turn of the other chat to be running.
MEETING_SECONDS = 30.0


@dataclass
class FirstTurnsMeet:
    """The first turn of each of two chats waits (MEETING_SECONDS at most) until the other chat's first
    turn is running, so that two chats run side by side however loaded the machine is, whenever the
    bot runs them side by side; should one chat's turns wait for the other's, it waits in vain."""

    sides: tuple[str, str]
    arrived: dict[str, asyncio.Event] = field(default_factory=dict)

    async def __call__(self, side: str) -> None:
        """Wait here if this is the side's first turn."""
        mine = self.arrived.setdefault(side, asyncio.Event())
        if mine.is_set():
            return
        mine.set()
        other = self.sides[1] if side == self.sides[0] else self.sides[0]
        with suppress(TimeoutError):
            await asyncio.wait_for(self.arrived.setdefault(other, asyncio.Event()).wait(), MEETING_SECONDS)


@dataclass
class Brain:
    """The scripted model for both agents: onboarding by keywords, chat by echo."""

    chat_calls: list[str] = field(default_factory=list)
    onboarding_calls: list[str] = field(default_factory=list)
    delay: float = 0.0
    reply: Callable[[str], str] = lambda text: f"echo: {text}"
    raise_on: str | None = None
    in_flight: int = 0
    most_in_flight: int = 0

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await self.before_answer(messages)
            if self.delay:
                await asyncio.sleep(self.delay)
            return self._answer(messages, info)
        finally:
            self.in_flight -= 1

    async def before_answer(self, messages: list[ModelMessage]) -> None:
        """Runs while the call is in flight, before the delay and the answer: nothing here."""

    def _answer(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        tools = {tool.name for tool in info.function_tools}
        last = messages[-1]
        if "set_name" in tools:
            if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
                returned = [str(p.content) for p in last.parts if isinstance(p, ToolReturnPart)]
                if "onboarding finished" in returned:
                    return ModelResponse(parts=[TextPart("All set! Talk to me about anything.")])
                return ModelResponse(parts=[TextPart("Noted: " + "; ".join(returned))])
            text = last_user_text(messages)
            self.onboarding_calls.append(text)
            calls = _onboarding_calls(text)
            if calls:
                return ModelResponse(parts=calls)
            return ModelResponse(
                parts=[TextPart("Hi! I'm Nikita. What should I call you, and where are you?")]
            )
        text = last_user_text(messages)
        self.chat_calls.append(text)
        if self.raise_on is not None and self.raise_on in text:
            raise RuntimeError("a bug in the chat path")
        return ModelResponse(parts=[TextPart(self.reply(text))])


def _onboarding_calls(text: str) -> list[Any]:
    calls: list[Any] = []
    if m := re.search(r"call me (\w+)", text, re.IGNORECASE):
        calls.append(ToolCallPart("set_name", {"name": m.group(1)}))
    if m := re.search(r"i'm in ([\w /]+)", text, re.IGNORECASE):
        calls.append(ToolCallPart("set_timezone", {"place_or_zone": m.group(1).strip()}))
    if m := re.search(r"i like (\w+)", text, re.IGNORECASE):
        calls.append(ToolCallPart("add_interest", {"interest": m.group(1)}))
    if m := re.search(r"no (\w+) please", text, re.IGNORECASE):
        calls.append(ToolCallPart("add_boundary", {"boundary": f"no {m.group(1)}"}))
    if "that's all" in text.lower():
        calls.append(ToolCallPart("finish_onboarding", {}))
    return calls


@pytest.fixture(autouse=True)
def _ptb_timedelta(monkeypatch: pytest.MonkeyPatch) -> None:
    # Opt in to PTB's timedelta return values, so its deprecation warning (an error here) stays quiet.
    monkeypatch.setenv("PTB_TIMEDELTA", "1")


@pytest.fixture
def tg() -> Any:
    with FakeTelegram(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def brain() -> Brain:
    return Brain()


@pytest.fixture
def settings_factory(database_url: str, tg: FakeTelegram) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {
            "database_url": database_url,
            "telegram_bot_token": TOKEN,
            "telegram_api_base_url": tg.base_url,
            "model": "test",
            "summary_model": "test",
            "admin_ids": [ADMIN],
            "_env_file": None,
        }
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
def settings(settings_factory: Callable[..., Settings]) -> Settings:
    return settings_factory()


@pytest.fixture
async def runtime(engine: AsyncEngine, settings: Settings, brain: Brain) -> AsyncIterator[Runtime]:
    rt = await build_runtime(settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel())
    yield rt
    await rt.close()


@pytest.fixture
async def app(runtime: Runtime) -> AsyncIterator[AnyApplication]:
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        yield application


@asynccontextmanager
async def running_bot(settings: Settings, model: Model) -> AsyncIterator[Runtime]:
    """A runtime with `model` and its polling application, both closed on the way out."""
    rt = await build_runtime(settings, model=model, migrate=False, summary_model=TestModel())
    application = build_application(rt, webhook=False)
    try:
        async with running(application, poll_timeout=1):
            yield rt
    finally:
        await rt.close()


async def transcript_rows(runtime: Runtime) -> list[tuple[str, str, str]]:
    """(role, kind, content) of every transcript row, oldest first."""
    async with runtime.sessions() as session:
        rows = await session.execute(
            select(TranscriptMessage.role, TranscriptMessage.kind, TranscriptMessage.content).order_by(
                TranscriptMessage.id
            )
        )
        return [(role, kind, content) for role, kind, content in rows]
