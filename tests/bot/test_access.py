"""Access and spend through Telegram: the allowlist gate, /allow and /deny, token budgets, /stats.

Once, on SQLite: what these prove does not depend on the database (tests/agent/test_access.py
runs the SQL on both).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from genai_prices import Usage, calc_price
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage
from sqlalchemy import func, select

from agent.account.ratelimit import STRANGER_REPLY
from agent.core.settings import Settings
from agent.turn.daily_tokens import CAP_REPLY
from bench.fakes.telegram_api import FakeTelegram
from bot.app import build_application, running
from bot.handlers.messages import UNKNOWN_COMMAND
from bot.runtime import Runtime, build_runtime
from bot.services import services_of
from db.models import InboxUpdate, ModelUsage, TranscriptMessage, User
from tests.bot.conftest import ADMIN, Brain, transcript_rows

FRIEND = 42
STRANGER = 66
BOB = 77  # allowed by username
_message_ids = itertools.count(1000)


@pytest.fixture
def database_url(tmp_path: Path) -> str:
    """SQLite only (see the module docstring)."""
    return f"sqlite+aiosqlite:///{tmp_path / 'nikita.db'}"


@asynccontextmanager
async def bot(settings: Settings, brain: Brain) -> AsyncIterator[tuple[Runtime, Any]]:
    """The bot on these settings; the runtime closes with the application."""
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    application = build_application(runtime, webhook=False)
    async with running(application, poll_timeout=1):
        yield runtime, application


async def drained(application: Any) -> None:
    """Wait until every stored update is worked."""
    assert await services_of(application).delivery.dispatcher.drain(within=15)


def message_from(tg: FakeTelegram, user_id: int, text: str, *, username: str) -> None:
    """A private text message (a command when it starts with /) from a user with a @username."""
    message: dict[str, Any] = {
        "message_id": next(_message_ids),
        "from": {"id": user_id, "is_bot": False, "first_name": "Bob", "username": username},
        "chat": {"id": user_id, "type": "private", "first_name": "Bob"},
        "date": int(time.time()),
        "text": text,
    }
    if text.startswith("/"):
        message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}]
    tg.push_update({"message": message})


def button_from(tg: FakeTelegram, user_id: int) -> None:
    """A callback-button press (the forget confirmation's data) from `user_id`."""
    tg.push_update(
        {
            "callback_query": {
                "id": f"cb{user_id}",
                "from": {"id": user_id, "is_bot": False, "first_name": "Eve"},
                "chat_instance": "1",
                "data": "forget:confirm",
                "message": {
                    "message_id": 1,
                    "date": 0,
                    "chat": {"id": user_id, "type": "private", "first_name": "Eve"},
                    "text": "Forget everything?",
                },
            }
        }
    )


async def count(runtime: Runtime, model: Any) -> int:
    async with runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def test_a_stranger_costs_nothing_but_a_counter(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(access="allowlist", allowed_users=str(FRIEND))
    async with bot(settings, brain) as (runtime, application):
        tg.command(STRANGER, "/start")
        tg.user_message(STRANGER, "hello?")
        tg.sticker(STRANGER)
        tg.command(STRANGER, "/help")
        button_from(tg, STRANGER)
        await tg.wait_for_messages(1, chat_id=STRANGER)
        await drained(application)
        assert await count(runtime, User) == 0
        assert await count(runtime, TranscriptMessage) == 0
        async with runtime.sessions() as session:
            rows = (await session.execute(select(InboxUpdate.status, InboxUpdate.payload))).all()
        tg.command(ADMIN, "/stats")
        stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    # One polite line for the whole flood, no model call, every inbox row done without its payload.
    assert [m.text for m in tg.messages_to(STRANGER)] == [STRANGER_REPLY]
    assert brain.chat_calls == [] and brain.onboarding_calls == []
    assert len(rows) == 5 and all(status == "done" and payload is None for status, payload in rows)
    assert "refused today (UTC): 5 updates from people not allowed; 1 strangers told" in stats


async def test_allowed_ids_usernames_and_admins_get_through(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(access="allowlist", allowed_users=f"{FRIEND}, @BoB", onboarding_enabled=False)
    async with bot(settings, brain) as (_runtime, _):
        tg.user_message(FRIEND, "by id")
        message_from(tg, BOB, "by username", username="bob")
        tg.user_message(ADMIN, "as admin")
        for chat in (FRIEND, BOB, ADMIN):
            await tg.wait_for_messages(1, chat_id=chat)
    assert sorted(brain.chat_calls) == ["as admin", "by id", "by username"]


async def test_allow_and_deny_at_run_time(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(access="allowlist", onboarding_enabled=False)
    async with bot(settings, brain) as (_runtime, application):
        tg.command(STRANGER, "/allow 66")  # not an admin: the command is unknown to them
        assert (await tg.wait_for_messages(1, chat_id=STRANGER))[-1].text == STRANGER_REPLY
        tg.command(ADMIN, "/allow 66")
        assert "66 is allowed" in (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
        tg.user_message(STRANGER, "let me in")
        assert (await tg.wait_for_messages(2, chat_id=STRANGER))[-1].text == "echo: let me in"
        tg.command(ADMIN, "/allow @friend_user")
        await tg.wait_for_messages(2, chat_id=ADMIN)
        message_from(tg, FRIEND, "/allow 42", username="Friend_User")  # allowed, yet no admin
        assert (await tg.wait_for_messages(1, chat_id=FRIEND))[-1].text == UNKNOWN_COMMAND
        tg.command(ADMIN, "/deny 66")
        assert "66 is denied" in (await tg.wait_for_messages(3, chat_id=ADMIN))[-1].text
        tg.user_message(STRANGER, "still there?")
        await drained(application)
        tg.command(ADMIN, "/access")
        listing = (await tg.wait_for_messages(4, chat_id=ADMIN))[-1].text
    assert brain.chat_calls == ["let me in"]
    assert "access: allowlist" in listing and "allowed by /allow: @friend_user" in listing
    assert "denied by /deny: 66" in listing
    assert len(tg.messages_to(STRANGER)) == 2  # no answer to "still there?" (told once a day)


async def test_deny_blocks_in_open_mode(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False)
    async with bot(settings, brain) as (runtime, _application):
        tg.user_message(STRANGER, "open to all")
        await tg.wait_for_messages(1, chat_id=STRANGER)
        tg.command(ADMIN, f"/deny {ADMIN}")
        assert "always allowed" in (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
        tg.command(ADMIN, "/deny 66")
        await tg.wait_for_messages(2, chat_id=ADMIN)
        tg.user_message(STRANGER, "and now?")
        assert (await tg.wait_for_messages(2, chat_id=STRANGER))[-1].text == STRANGER_REPLY
        tg.command(ADMIN, "/allow 66")
        await tg.wait_for_messages(3, chat_id=ADMIN)
        tg.user_message(STRANGER, "back again")
        assert (await tg.wait_for_messages(3, chat_id=STRANGER))[-1].text == "echo: back again"
    assert brain.chat_calls == ["open to all", "back again"]
    rows = await transcript_rows(runtime)
    assert ("user", "text", "and now?") not in rows


async def test_the_user_budget_stops_the_model_and_keeps_the_message(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(user_daily_tokens=1)
    async with bot(settings, brain) as (runtime, _):
        tg.command(FRIEND, "/start")  # onboarding's first model call spends the whole budget
        await tg.wait_for_messages(1, chat_id=FRIEND)
        tg.user_message(FRIEND, "call me Sam")
        assert (await tg.wait_for_messages(2, chat_id=FRIEND))[-1].text == CAP_REPLY
        tg.command(ADMIN, "/stats")
        stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert brain.onboarding_calls == ["/start"]
    assert ("user", "onboarding", "call me Sam") in await transcript_rows(runtime)
    assert (
        "budget refusals today (UTC): 1 over USER_DAILY_TOKENS, 0 over GROUP_DAILY_TOKENS, "
        "0 over DAILY_TOKENS" in stats
    )


async def test_the_budgets_stop_turns(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, user_daily_tokens=1, daily_tokens=0)
    async with bot(settings, brain) as (runtime, _):
        tg.user_message(FRIEND, "first")
        await tg.wait_for_messages(1, chat_id=FRIEND)
        tg.user_message(FRIEND, "second")
        assert (await tg.wait_for_messages(2, chat_id=FRIEND))[-1].text == CAP_REPLY
        tg.user_message(STRANGER, "someone else")  # their own budget is untouched
        assert (await tg.wait_for_messages(1, chat_id=STRANGER))[-1].text == "echo: someone else"
    assert brain.chat_calls == ["first", "someone else"]
    rows = await transcript_rows(runtime)
    assert ("user", "text", "second") in rows and ("assistant", "budget", CAP_REPLY) in rows


async def test_the_bot_wide_budget_stops_everyone(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False, user_daily_tokens=0, daily_tokens=1)
    async with bot(settings, brain) as (runtime, _):
        tg.user_message(FRIEND, "spends it all")
        await tg.wait_for_messages(1, chat_id=FRIEND)
        tg.user_message(STRANGER, "my first")
        assert (await tg.wait_for_messages(1, chat_id=STRANGER))[-1].text == CAP_REPLY
        tg.command(ADMIN, "/stats")
        stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert brain.chat_calls == ["spends it all"]
    assert ("user", "text", "my first") in await transcript_rows(runtime)
    assert "0 over USER_DAILY_TOKENS, 0 over GROUP_DAILY_TOKENS, 1 over DAILY_TOKENS" in stats


@dataclass
class CachingBrain(Brain):
    """The chat brain on a provider that read most of every request from its prompt cache."""

    async def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        response = await super().__call__(messages, info)
        response.usage = RequestUsage(output_tokens=40, **CACHED)
        return response


CACHED = {
    "input_tokens": 12_000,
    "cache_read_tokens": 9_000,
    "cache_write_tokens": 2_000,
    "cache_write_1h_tokens": 500,
}


async def test_stats_shows_tokens_cache_share_and_cost(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any
) -> None:
    settings = settings_factory(onboarding_enabled=False, model="anthropic:claude-sonnet-4-5")
    async with bot(settings, CachingBrain()) as (runtime, _):
        for n, text in enumerate(("what does this cost?", "and now?"), start=1):
            tg.user_message(FRIEND, text)
            await tg.wait_for_messages(n, chat_id=FRIEND)
        tg.command(ADMIN, "/stats")
        stats = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
        async with runtime.sessions() as session:
            usage = (await session.execute(select(ModelUsage))).scalars().one()
    # Two turns of the same request, added up in one row.
    day = {name: 2 * count for name, count in CACHED.items()}
    assert (usage.calls, usage.output_tokens, usage.cache_write_1h_tokens) == (2, 80, 1000)
    model = {"model_ref": "claude-sonnet-4-5", "provider_id": "anthropic"}
    billed = calc_price(Usage(output_tokens=80, **day), **model)
    uncached = calc_price(Usage(input_tokens=day["input_tokens"], output_tokens=80), **model)
    assert "model use today (UTC): 2 calls, 24000 tokens in (75% from cache) / 80 out (chat 2)" in stats
    tokens = "24k in (75% from cache, 17% cache writes), 80 out"
    cost = f"~${billed.total_price:.4f} (~${uncached.total_price:.4f} uncached)"
    assert f"  chat: {tokens}, {cost} (anthropic:claude-sonnet-4-5)" in stats
    assert f"  all kinds: {tokens}, estimated {cost}" in stats
    assert "refused today (UTC): 0 updates" in stats
