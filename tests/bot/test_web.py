"""Webhook mode through the real Starlette app: the secret, retries, health and HTTP-triggered jobs."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.test import TestModel

from agent.core.errors import ConfigurationError
from agent.core.settings import Settings
from bench.delivery_harness import TOKEN_AND_SECRET, bot_env
from bench.fakes.telegram_api import FakeTelegram
from bot.__main__ import main
from bot.app import build_application, running
from bot.runtime import Runtime, build_runtime
from bot.web.app import SECRET_HEADER, WEBHOOK_PATH, build_web_app
from tests.bot.conftest import Brain
from tests.bot.test_start import free_port

URL = "https://nikita.example/telegram/webhook"


@pytest.fixture
async def webhook_runtime(
    settings_factory: Callable[..., Settings], engine: Any, brain: Brain
) -> AsyncIterator[Runtime]:
    settings = settings_factory(
        webhook_url=URL, webhook_secret="s3cret", tasks_secret="t0ken", onboarding_enabled=False
    )
    runtime = await build_runtime(
        settings, model=FunctionModel(brain), migrate=False, summary_model=TestModel()
    )
    yield runtime
    await runtime.close()


@pytest.fixture
async def client(webhook_runtime: Runtime) -> AsyncIterator[httpx.AsyncClient]:
    application = build_application(webhook_runtime)
    assert application.updater is None  # webhook mode: no polling machinery
    web = build_web_app(application, webhook_runtime)
    async with running(application):
        transport = httpx.ASGITransport(app=web)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            yield http


async def test_webhook_is_registered_with_its_secret(client: httpx.AsyncClient, tg: FakeTelegram) -> None:
    assert tg.webhook_url == URL
    assert tg.webhook_secret == "s3cret"


async def test_updates_without_the_secret_are_refused(
    client: httpx.AsyncClient, tg: FakeTelegram, brain: Brain
) -> None:
    update = tg.user_message(5, "forged")
    assert (await client.post(WEBHOOK_PATH, json=update)).status_code == 403
    wrong = {SECRET_HEADER: "guess"}
    assert (await client.post(WEBHOOK_PATH, json=update, headers=wrong)).status_code == 403
    right = {SECRET_HEADER: "s3cret"}
    assert (await client.post(WEBHOOK_PATH, content=b"{not json", headers=right)).status_code == 400
    assert brain.chat_calls == []


async def test_an_update_with_the_secret_is_answered_once_even_when_retried(
    client: httpx.AsyncClient, tg: FakeTelegram, brain: Brain
) -> None:
    headers = {SECRET_HEADER: "s3cret"}
    update = tg.user_message(5, "hello over https")
    first = await client.post(WEBHOOK_PATH, json=update, headers=headers)
    assert first.status_code == 200
    replies = await tg.wait_for_messages(1, chat_id=5)
    assert replies[0].text == "echo: hello over https"
    # Telegram retries the same update: the inbox has it already, nothing is sent again.
    assert (await client.post(WEBHOOK_PATH, json=update, headers=headers)).status_code == 200
    # Another update carrying the same message (as after an update whose own commit failed once its
    # turn had stored the answer) is sent the stored answer, without a second turn.
    again = {**update, "update_id": update["update_id"] + 1000}
    assert (await client.post(WEBHOOK_PATH, json=again, headers=headers)).status_code == 200
    await client.post(WEBHOOK_PATH, json=tg.user_message(5, "and then"), headers=headers)
    replies = await tg.wait_for_messages(3, chat_id=5)
    assert [r.text for r in replies] == ["echo: hello over https", "echo: hello over https", "echo: and then"]
    assert brain.chat_calls == ["hello over https", "and then"]


async def test_healthz(client: httpx.AsyncClient) -> None:
    response = await client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"ok": True}


async def test_tasks_need_the_bearer_secret(client: httpx.AsyncClient) -> None:
    assert (await client.post("/tasks/close-idle-conversations")).status_code == 403
    bad = {"Authorization": "Bearer nope"}
    assert (await client.post("/tasks/close-idle-conversations", headers=bad)).status_code == 403
    good = {"Authorization": "Bearer t0ken"}
    response = await client.post("/tasks/close-idle-conversations", headers=good)
    assert response.status_code == 200 and response.json()["job"] == "close-idle-conversations"
    # The job's retired name, as an external scheduler may still be set up to call it, runs it too.
    response = await client.post("/tasks/sessions", headers=good)
    assert response.status_code == 200 and response.json()["result"] == {"closed": 0}
    assert (await client.post("/tasks/no-such-job", headers=good)).status_code == 404
    # Due follow-ups, for Cloud Scheduler or Heroku Scheduler: nothing due, no model call.
    assert (await client.post("/tasks/touchpoints")).status_code == 403
    response = await client.post("/tasks/touchpoints", headers=good)
    assert response.status_code == 200 and response.json()["result"] == {"due": 0}
    # Retention of diagnostic data, for a host whose scheduler calls in.
    assert (await client.post("/tasks/retention")).status_code == 403
    response = await client.post("/tasks/retention", headers=good)
    assert response.status_code == 200 and response.json()["result"] == {
        "days_rolled_up": 0,
        "snapshots_deleted": 0,
        "snapshots_slimmed": 0,
        "histories_emptied": 0,
    }


async def test_webhook_mode_refuses_to_start_without_a_secret(
    settings_factory: Callable[..., Settings], engine: Any
) -> None:
    runtime = await build_runtime(
        settings_factory(webhook_url=URL), model=TestModel(), migrate=False, summary_model=TestModel()
    )
    try:
        with pytest.raises(ConfigurationError, match="WEBHOOK_SECRET"):
            build_web_app(build_application(runtime), runtime)
    finally:
        await runtime.close()


def test_a_webhook_telegram_refuses_stops_the_start_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, sqlite_schema: Path
) -> None:
    # `python -m bot run`'s own entry point, in this process: the start checks pass against the fakes,
    # then Telegram refuses the webhook while the bot registers it, and the start stops in one line.
    database = tmp_path / "bot.db"
    shutil.copyfile(sqlite_schema, database)  # at the newest revision: the start migrates nothing
    monkeypatch.chdir(tmp_path)  # no .env
    for platform in ("K_SERVICE", "DYNO", "PORT"):
        monkeypatch.delenv(platform, raising=False)
    refusal = "bad webhook: an https url must be provided for webhook"
    with FakeTelegram(token=TOKEN_AND_SECRET[0]) as telegram:
        telegram.fail_next("setWebhook", error_code=400, description=f"Bad Request: {refusal}")
        env = bot_env(
            database_url=f"sqlite+aiosqlite:///{database}",
            telegram_url=telegram.base_url,
            model_url="http://127.0.0.1:9",  # never called: PydanticAI's test model answers
            port=free_port(),
            webhook_url=URL,
            MODEL="test",
        )
        for name, value in env.items():
            monkeypatch.setenv(name, value)
        assert main(["run"]) == 2
        assert [call.params["url"] for call in telegram.calls_to("setWebhook")] == [URL]
        assert telegram.webhook_url == ""  # nothing registered
    stderr = capsys.readouterr().err
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert "Traceback" not in stderr
    assert lines[-1] == (
        f"configuration error: Telegram refused the webhook {URL} (BadRequest: B{refusal[1:]}): "
        "check WEBHOOK_URL (a public https:// address ending in /telegram/webhook) and WEBHOOK_SECRET"
    ), stderr
    assert sum("Telegram refused the webhook" in line for line in lines) == 1
