"""The walls end to end, through the real python-telegram-bot and the fake Bot API: a member's private
secret never reaches the group's model requests, and only a group's admin can make it forget."""

from __future__ import annotations

import json
from collections.abc import Callable

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
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.handlers.group_forget import GROUP_FORGET_ADMINS_ONLY, GROUP_FORGOTTEN
from bot.runtime import Runtime
from db.models import TranscriptMessage, User
from tests.bot.conftest import last_user_text, running_bot

pytestmark = [
    pytest.mark.both_databases,
    # The group surface of the fake Bot API (bench/fakes/telegram_groups.py) drives this test.
    pytest.mark.skipif(
        not hasattr(FakeTelegram, "group_message"), reason="the fake Bot API speaks no groups"
    ),
]

GROUP, ANA, BOB = -4002, 21, 22
SECRET = "aquamarinesecret"


async def group_row(runtime: Runtime, chat_id: int) -> User | None:
    async with runtime.sessions() as session:
        return await session.scalar(select(User).where(User.chat_id == chat_id))


class Searcher:
    """Records every request (but its own tool calls); "private" in a prompt makes it search."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent = json.dumps(
            [info.instructions, [[p for p in m.parts if p.part_kind != "tool-call"] for m in messages]],
            default=str,
        )
        text = last_user_text(messages)
        self.requests.append((text, sent))
        last = messages[-1]
        returned = (
            [p for p in last.parts if isinstance(p, ToolReturnPart)] if isinstance(last, ModelRequest) else []
        )
        if returned:
            return ModelResponse(parts=[TextPart("found: " + json.dumps(returned[-1].content, default=str))])
        if "private" in text:
            return ModelResponse(parts=[ToolCallPart("conversation_search", {"query": "code word"})])
        return ModelResponse(parts=[TextPart("ok")])


async def test_a_private_secret_stays_out_of_the_group_and_only_an_admin_forgets_the_group(
    tg: FakeTelegram, settings_factory: Callable[..., Settings], engine: AsyncEngine
) -> None:
    searcher = Searcher()
    async with running_bot(settings_factory(onboarding_enabled=False), FunctionModel(searcher)) as runtime:
        tg.user_message(ANA, f"my code word is {SECRET}")
        await tg.wait_for_messages(1, chat_id=ANA)
        tg.group_message(GROUP, ANA, "see you at the lake", first_name="Ana")
        tg.mention(GROUP, BOB, "what did Ana tell you in private?", first_name="Bob")
        answer = (await tg.wait_for_messages(1, chat_id=GROUP))[0]
        assert answer.text.startswith("found:") and SECRET not in answer.text
        group_requests = [sent for text, sent in searcher.requests if "(to you)" in text]
        assert len(group_requests) == 2 and all(SECRET not in sent for sent in group_requests)

        tg.group_command(GROUP, BOB, "/forget confirm", first_name="Bob")
        assert (await tg.wait_for_messages(2, chat_id=GROUP))[-1].text == GROUP_FORGET_ADMINS_ONLY
        assert await group_row(runtime, GROUP) is not None
        tg.make_admin(GROUP, ANA)
        tg.group_command(GROUP, ANA, "/forget confirm", first_name="Ana")
        assert (await tg.wait_for_messages(3, chat_id=GROUP))[-1].text == GROUP_FORGOTTEN
        assert await group_row(runtime, GROUP) is None
        async with runtime.sessions() as session:
            ana = await session.scalar(select(User).where(User.telegram_id == ANA))
            assert ana is not None
            mine = await session.scalar(
                select(func.count()).select_from(TranscriptMessage).where(TranscriptMessage.user_id == ana.id)
            )
        assert mine == 2  # her private chat is hers: the group's /forget leaves it
