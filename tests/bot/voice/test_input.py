"""Bodies, ids and times from outside are checked before the database: 400 or 404, never a 500 or 503."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from sqlalchemy import func, select

from bench.fakes.voice_agent import elevenlabs_signature
from db.models import Conversation, TranscriptMessage

from .conftest import INITIATE_SECRET, OpenApp, VoiceApp
from .test_errors import error

ALICE = 702
DEEP = b"[" * 100_000 + b"]" * 100_000
INITIATE = {"Authorization": f"Bearer {INITIATE_SECRET}"}


async def _conversations(app: VoiceApp) -> int:
    async with app.runtime.sessions() as session:
        return int(await session.scalar(select(func.count(Conversation.id))) or 0)


async def _initiate(app: VoiceApp, body: dict[str, Any]) -> httpx.Response:
    return await app.http.post("/voice/initiate", json=body, headers=INITIATE)


async def test_bodies_nested_past_the_depth_limit_are_400(open_app: OpenApp) -> None:
    app = await open_app(voice_postprocess_at_once=False)
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    error(await app.http.post("/voice/initiate", content=DEEP, headers=INITIATE), 400, "bad_request")
    tool = await app.http.post(
        "/voice/server-tool/get_memory", content=DEEP, headers={"X-Voice-Token": call.token}
    )
    error(tool, 400, "bad_request")
    # Arguments nested within the limit but where a number or string belongs are the tool's 400.
    nested = {"query": [[["x"]]], "limit": {"n": [1]}}
    error(await call.tool("get_memory", **nested), 400, "invalid_arguments")
    # Unsigned, the depth is never looked at; signed, the webhook's body is refused as a payload.
    assert (await app.http.post("/voice/call-ended", content=DEEP)).status_code == 401
    error(await _signed(app, DEEP), 400, "bad_payload")


async def _signed(app: VoiceApp, body: bytes) -> httpx.Response:
    signature = elevenlabs_signature(body, app.agent.webhook_secret, int(app.clock.now().timestamp()))
    return await app.http.post("/voice/call-ended", content=body, headers={"ElevenLabs-Signature": signature})


async def test_telegram_ids_must_be_ascii_digits_within_64_bits(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    for malformed in ("²", "١٢", "1e3", " 7", "", 7.0, [7], True):
        error(await _initiate(app, {"telegram_id": malformed}), 400, "bad_request")
    for unknown in ("9" * 5000, "-" + "9" * 5000, str(2**63), 2**63, -(2**63) - 1, "0" * 5000 + "1"):
        error(await _initiate(app, {"telegram_id": unknown}), 404, "unknown_user")
    assert (await _initiate(app, {"telegram_id": str(ALICE)})).status_code == 200


@pytest.mark.both_databases
async def test_user_ids_past_64_bits_are_404_on_both_databases(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    for unknown in (2**70, 2**63, str(2**64), -(2**63) - 1, 0, -1):
        error(await _initiate(app, {"user_id": unknown}), 404, "unknown_user")
    for telegram_id in (2**70, -(2**63) - 1):
        error(await _initiate(app, {"telegram_id": telegram_id}), 404, "unknown_user")
    error(await _initiate(app, {"user_id": 2**63 - 1}), 404, "unknown_user")


async def test_call_times_out_of_range_are_400_and_store_nothing(open_app: OpenApp) -> None:
    app = await open_app(voice_postprocess_at_once=False)
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    call.say("user", "I adopted a cat called Miso")
    before = await _conversations(app)
    changes: list[tuple[str, Any]] = [
        ("start_time_unix_secs", 10**20),
        ("start_time_unix_secs", -(10**20)),
        ("call_duration_secs", 1e300),
        ("call_duration_secs", float("nan")),
        ("time_in_call_secs", float("inf")),
        ("time_in_call_secs", 10**20),
        ("event_timestamp", 10**20),
    ]
    for field, value in changes:
        payload = json.loads(json.dumps(call.transcription()))  # its turns are the call's own
        if field == "event_timestamp":
            payload["event_timestamp"] = value
            del payload["data"]["metadata"]["start_time_unix_secs"]
        elif field == "time_in_call_secs":
            payload["data"]["transcript"][-1][field] = value
        else:
            payload["data"]["metadata"][field] = value
        error(await app.agent.deliver(payload), 400, "bad_payload")
    assert await _conversations(app) == before
    stored = await call.end()
    assert stored.status_code == 200 and stored.json()["stored"] is True


async def test_lone_surrogates_become_replacement_characters_and_the_call_is_stored(
    open_app: OpenApp,
) -> None:
    app = await open_app(voice_postprocess_at_once=False)
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    headers = {"X-Voice-Token": call.token}
    for tool, arguments in (
        ("get_memory", {"query": "cat \ud800"}),
        ("update_memory", {"fact": "Likes \udfff"}),
    ):
        body = json.dumps(arguments).encode()  # ASCII escapes: \ud800 reaches the parser as such
        sent = await app.http.post(f"/voice/server-tool/{tool}", content=body, headers=headers)
        assert sent.status_code == 200, sent.text
    call.say("user", "I adopted a cat called \udc00Miso")
    stored = await app.agent.deliver(call.transcription())
    assert stored.status_code == 200 and stored.json()["stored"] is True
    async with app.runtime.sessions() as session:
        said = await session.scalars(
            select(TranscriptMessage.content).where(TranscriptMessage.content.contains("Miso"))
        )
        assert list(said) == ["I adopted a cat called \ufffdMiso"]
