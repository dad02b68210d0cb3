"""Voice fixtures: the real web app (webhook mode) on the test database, the fake Telegram Bot API, the
fake ElevenLabs voice agent over httpx's ASGI transport, scripted chat and summary models."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.clock import system_now
from agent.core.settings import Settings
from agent.graph import KnowledgeGraph, NullGraph
from agent.history.turn_notes import turn_note
from bench.clock import FrozenClock
from bench.fakes.telegram_api import FakeTelegram
from bench.fakes.voice_agent import FakeVoiceAgent
from bot.app import build_application, running
from bot.runtime import Runtime, build_runtime
from bot.web.app import SECRET_HEADER, WEBHOOK_PATH, build_web_app

INITIATE_SECRET = "initiate-secret-for-tests"
TOKEN_SECRET = "token-signing-key-for-tests"
WEBHOOK_SECRET = "whsec_for_tests"
TELEGRAM_SECRET = "tg-secret"
VOICE_SETTINGS: dict[str, Any] = {
    "voice_token_secret": TOKEN_SECRET,
    "voice_initiate_secret": INITIATE_SECRET,
    "elevenlabs_webhook_secret": WEBHOOK_SECRET,
    "elevenlabs_agent_id": "agent_fake_nikita",
}
_LINE = re.compile(r"^\[#\d+ \d\d:\d\d (user|assistant)\] (.*)$", re.MULTILINE)


@dataclass
class Chat:
    """The chat model: records its instructions, calls the tools it is given, then answers."""

    instructions: list[str] = field(default_factory=list)
    plans: list[list[tuple[str, dict[str, Any]]]] = field(default_factory=list)
    tool_returns: dict[str, Any] = field(default_factory=dict)

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        returns = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if returns:
            self.tool_returns.update({p.tool_name: p.content for p in returns})
            return ModelResponse(parts=[TextPart("I remember.")])
        # The context the model reads: the instructions and this turn's note.
        self.instructions.append(f"{info.instructions or ''}\n\n{turn_note(last)}")
        if self.plans:
            return ModelResponse(parts=[ToolCallPart(name, args) for name, args in self.plans.pop(0)])
        return ModelResponse(parts=[TextPart("ok")])


_NUMBERED = re.compile(r"^\[#(\d+) \d\d:\d\d (\w+)\] (.*)$", re.MULTILINE)


def _said(prompt: str, role: str) -> list[str]:
    return [text for who, text in _LINE.findall(prompt) if who == role]


def memory_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """SUMMARY_MODEL: extraction and day summaries that repeat what the person said (so tests can find it)."""
    tool = info.output_tools[0]
    prompt = next(
        str(p.content)
        for m in reversed(messages)
        if isinstance(m, ModelRequest)
        for p in m.parts
        if hasattr(p, "content")
    )
    said = _said(prompt, "user")
    if "user_facts" in tool.parameters_json_schema.get("properties", {}):
        output: dict[str, Any] = {
            # Each fact on the line that says it: a fact standing on nobody's words is not stored.
            "user_facts": [
                {"text": f"they said: {text}", "message_ids": [int(number)]}
                for number, who, text in _NUMBERED.findall(prompt)
                if who == "user" and not text.endswith("?")
            ],
            "threads_to_open": [{"type": "question", "content": s} for s in said if s.endswith("?")],
            "summary": "They talked. They said: " + " / ".join(said),
            "tone": "warm",
            "key_moments": [],
        }
    else:
        notes = re.findall(r"^- (.*)$", prompt.split("New messages:")[0], re.MULTILINE)
        output = {"summary": "Today: " + " / ".join([*notes, *said]), "key_moments": said[-2:]}
    return ModelResponse(parts=[ToolCallPart(tool.name, output)])


@dataclass
class VoiceApp:
    """One running app with its fakes."""

    runtime: Runtime
    http: httpx.AsyncClient
    agent: FakeVoiceAgent
    tg: FakeTelegram
    clock: FrozenClock
    chat: Chat

    async def text(self, telegram_id: int, text: str, *, first_name: str = "Alice") -> str:
        """A Telegram message through the webhook; returns the bot's reply once it is sent."""
        before = len(self.tg.messages_to(telegram_id))
        update = self.tg.user_message(
            telegram_id, text, first_name=first_name, date=int(self.clock.now().timestamp())
        )
        answer = await self.http.post(WEBHOOK_PATH, json=update, headers={SECRET_HEADER: TELEGRAM_SECRET})
        assert answer.status_code == 200
        replies = await self.tg.wait_for_messages(before + 1, chat_id=telegram_id)
        await self.runtime.settle()
        return replies[-1].text

    def later(self, **delta: float) -> None:
        """Let time pass."""
        self.clock.advance(timedelta(**delta))


OpenApp = Callable[..., Awaitable[VoiceApp]]


def app_clock() -> FrozenClock:
    """The app's clock: today's wall time (Telegram dates and signatures follow it), moved by tests.

    Never later than 21:00 UTC: the tests move it on by minutes and expect the same day, so a run in
    the last hours before midnight starts a little earlier instead of crossing into tomorrow.
    """
    now = system_now().replace(microsecond=0)
    return FrozenClock(current=min(now, now.replace(hour=21, minute=0, second=0)))


@pytest.fixture
async def open_app(
    settings_factory: Callable[..., Settings], engine: AsyncEngine, tg: FakeTelegram, tmp_path: Path
) -> AsyncIterator[OpenApp]:
    """Start the web app (voice settings on unless overridden); everything stops after the test."""
    stack: list[Any] = []

    async def _open(
        graph: KnowledgeGraph | None = None, clock: FrozenClock | None = None, **overrides: Any
    ) -> VoiceApp:
        clock = clock or app_clock()
        chat = Chat()
        settings = settings_factory(
            **{
                "webhook_url": "https://nikita.example/telegram/webhook",
                "webhook_secret": TELEGRAM_SECRET,
                "onboarding_enabled": False,
                "embedder": "none",
                **VOICE_SETTINGS,
                **overrides,
            }
        )
        runtime = await build_runtime(
            settings,
            clock=clock,
            model=FunctionModel(chat),
            summary_model=FunctionModel(memory_model),
            migrate=False,
            embedder=None,
            graph=graph or NullGraph(),
        )
        stack.append(runtime)
        application = build_application(runtime)
        web = build_web_app(application, runtime)
        started = running(application)
        await started.__aenter__()
        stack.append(started)
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=web), base_url="http://testserver")
        stack.append(http)
        agent = FakeVoiceAgent(http, clock, INITIATE_SECRET, WEBHOOK_SECRET)
        return VoiceApp(runtime, http, agent, tg, clock, chat)

    yield _open
    for item in reversed(stack):
        if isinstance(item, Runtime):
            await item.close()
        elif isinstance(item, httpx.AsyncClient):
            await item.aclose()
        else:
            await item.__aexit__(None, None, None)
