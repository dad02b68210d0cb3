"""Nothing is acknowledged to Telegram before it is committed: the webhook's 200, polling's offset."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import select

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.web.app import WEBHOOK_PATH
from db.models import InboxUpdate
from tests.bot.conftest import Brain
from tests.bot.delivery_helpers import (
    WEBHOOK_HEADERS,
    eventually,
    inbox_rows,
    inbox_table_away,
    running_bot,
    slow_commit_of_inbox_rows,
    transcript,
    webhook_client,
    webhook_settings,
)


@pytest.mark.both_databases
async def test_the_webhook_answers_200_only_after_the_update_is_committed(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "hello")
        assert (await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)).status_code == 200
        async with runtime.sessions() as session:
            stored = await session.scalar(
                select(InboxUpdate).where(InboxUpdate.update_id == update["update_id"])
            )
        assert stored is not None and stored.telegram_user_id == 5
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: hello"]


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        7,
        {"message": {"text": "no update_id"}},
        {"update_id": "7"},
    ],
)
async def test_json_that_is_not_an_update_is_a_400_and_stores_nothing(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain, body: Any
) -> None:
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        response = await http.post(WEBHOOK_PATH, json=body, headers=WEBHOOK_HEADERS)
        assert response.status_code == 400
        assert await inbox_rows(runtime.sessions) == []


@pytest.mark.both_databases
async def test_a_failed_commit_is_a_503_and_telegrams_retry_is_answered_once(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "are you there?")
        async with inbox_table_away(runtime.sessions):
            response = await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)
            assert response.status_code == 503
        assert brain.chat_calls == []
        for _ in range(2):  # Telegram retries; a second retry of a stored update changes nothing
            assert (await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)).status_code == 200
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: are you there?"]
        await eventually(lambda: brain.chat_calls == ["are you there?"])
        assert len(await inbox_rows(runtime.sessions)) == 1


@pytest.mark.both_databases
async def test_the_turn_starts_while_the_update_commits_and_its_reply_waits_for_the_commit(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, database_url: str, brain: Brain
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("a commit slowed by a deferred constraint trigger is PostgreSQL's")
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
        # Long enough for the turn to start within it on a loaded machine.
        slow_commit_of_inbox_rows(runtime.sessions, seconds=4.0),
    ):
        update = tg.user_message(5, "quick")
        post = asyncio.create_task(http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS))
        # The model was asked while the update's commit (and so Telegram's 200) was still going on...
        await eventually(lambda: brain.chat_calls == ["quick"])
        assert not post.done()
        # ...and the answer is recorded and sent only once the update is committed.
        await asyncio.sleep(0.3)
        assert not post.done() and tg.messages_to(5) == []
        assert (await post).status_code == 200
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: quick"]
        assert await transcript(runtime.sessions) == [("user", "quick"), ("assistant", "echo: quick")]


@pytest.mark.both_databases
async def test_a_commit_failing_after_the_turn_started_sends_nothing_and_the_retry_is_answered_once(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, database_url: str, brain: Brain
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("a commit refused by a deferred constraint trigger is PostgreSQL's")
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "refused at commit")
        async with slow_commit_of_inbox_rows(runtime.sessions, seconds=3.0, refuse="refused at commit"):
            response = await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)
            assert response.status_code == 503
            assert brain.chat_calls == ["refused at commit"]  # the turn had started
            await asyncio.sleep(0.3)
            assert tg.messages_to(5) == [] and await inbox_rows(runtime.sessions) == []
        # Telegram delivers it again: answered once, and stored once.
        assert (await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)).status_code == 200
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: refused at commit"]
        await eventually(lambda: len(tg.messages_to(5)) == 1)
        assert await transcript(runtime.sessions) == [
            ("user", "refused at commit"),
            ("assistant", "echo: refused at commit"),
        ]


@pytest.mark.both_databases
async def test_text_with_nul_characters_through_the_webhook_is_stored_and_answered(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = webhook_settings(settings_factory)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "nul\x00inside")
        assert (await http.post(WEBHOOK_PATH, json=update, headers=WEBHOOK_HEADERS)).status_code == 200
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == ["echo: nulinside"]
        assert await transcript(runtime.sessions) == [("user", "nulinside"), ("assistant", "echo: nulinside")]


@pytest.mark.both_databases
async def test_polling_confirms_an_update_only_after_its_commit(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    settings = settings_factory(onboarding_enabled=False)
    async with running_bot(settings, brain) as (runtime, _, _):
        async with inbox_table_away(runtime.sessions):
            tg.user_message(9, "kept by Telegram")
            asked = len(tg.calls_to("getUpdates"))
            # The poller fetched it at least twice (the commit failed, so it asked for it again)...
            await eventually(lambda: len(tg.calls_to("getUpdates")) >= asked + 2)
            # ...and Telegram still holds it: no offset went past it.
            assert tg.pending_updates == 1 and tg.messages_to(9) == []
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=9)] == ["echo: kept by Telegram"]
        await eventually(lambda: tg.pending_updates == 0)
        assert brain.chat_calls == ["kept by Telegram"]
