"""PERSONA_NAME end to end: what the user reads (/start, /help) and what both agents are sent say Ada."""

from __future__ import annotations

from collections.abc import Callable

from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from tests.bot.conftest import _onboarding_calls, last_user_text, running_bot

ALICE = 42


class Recorder:
    """Both agents' model: scripted onboarding, an echo in chat; keeps every prompt it was sent."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.prompts.append(info.instructions or "")
        self.prompts += [p.content for m in messages for p in m.parts if isinstance(p, SystemPromptPart)]
        last = messages[-1]
        if "set_name" in {tool.name for tool in info.function_tools}:
            if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
                return ModelResponse(parts=[TextPart("All set.")])
            calls = _onboarding_calls(last_user_text(messages))
            return ModelResponse(parts=calls or [TextPart("Hello! What should I call you?")])
        return ModelResponse(parts=[TextPart("echo: " + last_user_text(messages))])


async def test_the_bot_introduces_itself_by_the_configured_name(
    engine: AsyncEngine, tg: FakeTelegram, settings_factory: Callable[..., Settings]
) -> None:
    recorder = Recorder()
    settings = settings_factory(persona_name="Ada")
    async with running_bot(settings, FunctionModel(recorder)):
        tg.command(ALICE, "/start")
        await tg.wait_for_messages(1, chat_id=ALICE)
        tg.user_message(ALICE, "call me Sam, I'm in Lisbon. That's all")
        await tg.wait_for_messages(2, chat_id=ALICE)
        tg.user_message(ALICE, "how are you?")
        await tg.wait_for_messages(3, chat_id=ALICE)
        tg.command(ALICE, "/help")
        tg.command(ALICE, "/start")
        sent = [m.text for m in await tg.wait_for_messages(5, chat_id=ALICE)]
        tg.command(ALICE, "/export")
        await tg.wait_for_documents(1)

    assert sent[2] == "echo: how are you?"  # onboarding finished; the chat agent answered
    assert sent[3].startswith("I'm Ada. ")
    assert sent[4].startswith("Hi Sam! I'm Ada.")
    assert not any("Nikita" in text for text in sent)
    assert tg.documents[0].filename == "ada-export.json"
    onboarding = [p for p in recorder.prompts if "Getting to know someone new" in p]
    chat = [p for p in recorder.prompts if p.startswith("# Who you are")]
    assert onboarding and chat
    assert all("You are Ada," in p for p in onboarding + chat)
    assert not any("Nikita" in p for p in recorder.prompts)
