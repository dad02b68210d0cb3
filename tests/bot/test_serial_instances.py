"""Two instances on one PostgreSQL: the inbox's lease alone keeps a chat's turns in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.web.app import WEBHOOK_PATH
from tests.bot.conftest import Brain, FirstTurnsMeet, user_prompts
from tests.bot.delivery_helpers import WEBHOOK_HEADERS, running_bot, webhook_client, webhook_settings

pytestmark = [pytest.mark.both_databases, pytest.mark.process]

CHATS = {"a": 11, "b": 12}
MESSAGES = 6


@dataclass
class ChatBrain(Brain):
    """Echoes, and records per chat how many turns ran at once and what history each one saw. The two
    chats' first turns meet (`FirstTurnsMeet`), so their overlap does not depend on the machine's load."""

    per_chat: dict[str, int] = field(default_factory=dict)
    most_per_chat: dict[str, int] = field(default_factory=dict)
    seen: dict[str, list[str]] = field(default_factory=dict)
    meet: FirstTurnsMeet = field(default_factory=lambda: FirstTurnsMeet(("a", "b")))

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompts = user_prompts(messages)
        chat = prompts[-1][0]
        self.seen[prompts[-1]] = prompts[:-1]
        self.per_chat[chat] = self.per_chat.get(chat, 0) + 1
        self.most_per_chat[chat] = max(self.most_per_chat.get(chat, 0), self.per_chat[chat])
        try:
            return await super().__call__(messages, info)
        finally:
            self.per_chat[chat] -= 1

    async def before_answer(self, messages: list[ModelMessage]) -> None:
        """The chat's first turn waits for the other chat's."""
        await self.meet(user_prompts(messages)[-1][0])


async def test_two_instances_never_interleave_a_chat_and_work_two_chats_side_by_side(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("several instances share one PostgreSQL; SQLite is one process")
    brain = ChatBrain(delay=0.1)
    settings = webhook_settings(settings_factory, inbox_webhook_wait_seconds=0)
    async with (
        running_bot(settings, brain, webhook=True) as (one, app_one, runner_one),
        running_bot(settings, brain, webhook=True) as (two, app_two, runner_two),
        webhook_client(app_one, one) as first,
        webhook_client(app_two, two) as second,
    ):
        # Each chat's messages arrive quickly, alternately at the two instances (a load balancer).
        for i in range(MESSAGES):
            for n, (prefix, chat) in enumerate(CHATS.items()):
                http = first if (i + n) % 2 == 0 else second
                update = tg.user_message(chat, f"{prefix}{i}")
                assert (
                    await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)
                ).status_code == 200
        await tg.wait_for_messages(len(CHATS) * MESSAGES, timeout=60)
        worked = (runner_one.dispatcher.worked, runner_two.dispatcher.worked)
    assert brain.most_per_chat == {"a": 1, "b": 1}  # never two turns of one chat at once
    assert brain.most_in_flight == 2  # the two chats side by side
    assert all(worked), worked  # both instances worked rows
    for prefix, chat in CHATS.items():
        assert [m.text for m in tg.messages_to(chat)] == [f"echo: {prefix}{i}" for i in range(MESSAGES)]
        # Each turn saw its chat's earlier turns, in order, whichever instance ran them.
        for i in range(MESSAGES):
            assert brain.seen[f"{prefix}{i}"] == [f"{prefix}{n}" for n in range(i)]
