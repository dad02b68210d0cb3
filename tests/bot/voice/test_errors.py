"""Tool errors are structured answers the voice agent can act on, never a 500; a failing memory
source degrades an answer; webhooks that carry no usable call are acknowledged; voice is off
without its settings."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx
import pytest
from sqlalchemy import text

from agent.core.errors import ConfigurationError
from db.models import ConversationThread, UserFact

from .conftest import OpenApp, VoiceApp

ALICE = 701


def error(response: httpx.Response, status: int, code: str) -> str:
    """The error message, after checking the status and the structured body."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["ok"] is False and body["error"]["code"] == code
    return str(body["error"]["message"])


@asynccontextmanager
async def table_away(app: VoiceApp, table: str) -> AsyncIterator[None]:
    """The table is gone for a moment (a storage fault the tool must survive), then restored."""
    async with app.runtime.engine.begin() as conn:
        await conn.execute(text(f"ALTER TABLE {table} RENAME TO {table}_away"))
    try:
        yield
    finally:
        async with app.runtime.engine.begin() as conn:
            await conn.execute(text(f"ALTER TABLE {table}_away RENAME TO {table}"))


async def test_tool_mistakes_come_back_as_structured_errors(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    assert "get_memory" in error(await call.tool("get_weather"), 400, "unknown_tool")
    assert "get_memory" in error(await call.tool("get_weather", in_body=True), 400, "unknown_tool")
    headers = {"X-Voice-Token": call.token}
    assert "name the tool" in error(
        await app.http.post("/voice/server-tool", json={"query": "x"}, headers=headers), 400, "unknown_tool"
    )
    assert "limit" in error(await call.tool("get_memory", query="x", limit=0), 400, "invalid_arguments")
    assert "limit" in error(await call.tool("get_memory", query="x", limit="many"), 400, "invalid_arguments")
    assert "fact" in error(await call.tool("update_memory"), 400, "invalid_arguments")
    assert "'preference'" in error(
        await call.tool("update_memory", fact="Likes tea", category="secrets"), 400, "invalid_arguments"
    )
    assert "at most 300 characters" in error(
        await call.tool("update_memory", fact="word " * 100), 400, "invalid_arguments"
    )
    assert "empty" in error(await call.tool("update_memory", fact="   "), 400, "invalid_arguments")
    for body in (b"{not json", b"[1, 2]"):
        sent = await app.http.post("/voice/server-tool/get_context", content=body, headers=headers)
        error(sent, 400, "bad_request")
    huge = b'{"query": "' + b"x" * (300 * 1024) + b'"}'
    error(
        await app.http.post("/voice/server-tool/get_memory", content=huge, headers=headers), 413, "too_large"
    )
    # The tool named in the body works like the one in the path.
    works = await call.tool("get_memory", in_body=True, query="hello")
    assert works.status_code == 200 and works.json()["tool"] == "get_memory"
    async with app.runtime.sessions() as session:
        assert await session.scalar(text("SELECT count(*) FROM user_facts")) == 0


async def test_storage_faults_degrade_get_memory_and_fail_update_memory_cleanly(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    assert (
        await call.tool("update_memory", fact="Alice plays the cello", category="personal")
    ).status_code == 200
    async with table_away(app, ConversationThread.__tablename__):
        degraded = await call.tool("get_memory", query="cello")
        assert degraded.status_code == 200
        result = degraded.json()["result"]
        assert [f["fact"] for f in result["facts"]] == ["Alice plays the cello"]
        assert result["note"] == "threads are unavailable right now"
    async with table_away(app, UserFact.__tablename__):
        message = error(await call.tool("update_memory", fact="Alice has a cat"), 503, "unavailable")
        assert "try again" in message
    # Once storage is back, the same request works.
    saved = await call.tool("update_memory", fact="Alice has a cat")
    assert saved.status_code == 200 and saved.json()["result"]["stored"] is True


async def test_webhooks_without_a_usable_call_are_acknowledged_and_store_nothing(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    audio = await app.agent.deliver({"type": "post_call_audio", "data": {"full_audio": "UklGRg=="}})
    assert audio.json() == {"ok": True, "stored": False, "reason": "not a transcription event"}
    silent = await call.end()
    assert silent.json() == {"ok": True, "stored": False, "reason": "nothing was said"}
    call.say("user", "hi")
    payload = call.transcription()
    del payload["data"]["conversation_initiation_client_data"]["dynamic_variables"]["secret__nikita_token"]
    anonymous = await app.agent.deliver(payload)
    assert anonymous.json()["stored"] is False and "no valid call token" in anonymous.json()["reason"]
    payload["data"]["conversation_initiation_client_data"]["dynamic_variables"]["secret__nikita_token"] = (
        "1:x:2:y"
    )
    assert (await app.agent.deliver(payload)).json()["stored"] is False
    error(await app.agent.deliver({"type": "post_call_transcription", "data": {}}), 400, "bad_payload")
    async with app.runtime.sessions() as session:
        assert await session.scalar(text("SELECT count(*) FROM conversations WHERE kind = 'voice'")) == 0


async def test_voice_is_off_without_its_token_secret_and_refuses_to_start_half_configured(
    open_app: OpenApp,
) -> None:
    app = await open_app(voice_token_secret=None)
    assert (await app.agent.initiate(telegram_id=ALICE)).status_code == 404
    assert (await app.http.post("/voice/call-ended", content=b"{}")).status_code == 404
    # Building the web app (the process's start) fails and names the missing setting.
    with pytest.raises(ConfigurationError, match="ELEVENLABS_WEBHOOK_SECRET"):
        await open_app(elevenlabs_webhook_secret=None)
