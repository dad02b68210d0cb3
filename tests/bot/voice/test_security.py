"""Who may do what: the initiate secret, call tokens, ElevenLabs signatures, and one user's token
never reaching another user's data."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
from sqlalchemy import func, select

from agent.account.forget import forget_user
from bench.fakes.voice_agent import FakeVoiceAgent
from db.models import Conversation, UserFact
from jobs.registry import run_job

from .conftest import OpenApp, VoiceApp

ALICE, BOB = 601, 602


def refused(response: httpx.Response, status: int = 401, code: str = "unauthorized") -> bool:
    body = response.json()
    return response.status_code == status and body["ok"] is False and body["error"]["code"] == code


async def count(app: VoiceApp, model: type) -> int:
    async with app.runtime.sessions() as session:
        return int(await session.scalar(select(func.count()).select_from(model)) or 0)


async def test_initiate_needs_the_operators_secret_and_a_known_user(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    assert refused(await app.http.post("/voice/initiate", json={"telegram_id": ALICE}))
    wrong = FakeVoiceAgent(app.http, app.clock, "not-the-secret", "x")
    assert refused(await wrong.initiate(telegram_id=ALICE))
    assert refused(await app.agent.initiate(telegram_id=999), 404, "unknown_user")
    assert refused(await app.agent.initiate(user_id="abc"), 400, "bad_request")
    assert refused(await app.agent.initiate(), 400, "bad_request")
    answer = await app.agent.initiate(telegram_id=ALICE)
    assert answer.status_code == 200 and answer.json()["dynamic_variables"]["user_name"] == "Alice"
    # The same user by our own id.
    assert (await app.agent.initiate(user_id=answer.json()["user_id"])).status_code == 200


async def test_server_tools_refuse_missing_forged_and_expired_tokens(open_app: OpenApp) -> None:
    app = await open_app(voice_token_ttl_seconds=600)
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    user, session, stamp, signature = call.token.split(":")
    forged = {
        "none": "",
        "garbage": "hello",
        "other user": f"{int(user) + 1}:{session}:{stamp}:{signature}",
        "later stamp": f"{user}:{session}:{int(stamp) + 600}:{signature}",
        "bad signature": f"{user}:{session}:{stamp}:{'0' * 64}",
    }
    for name, token in forged.items():
        assert refused(await call.tool("get_context", token=token)), name
    bearer = await app.http.post(
        "/voice/server-tool/get_context", json={}, headers={"Authorization": f"Bearer {call.token}"}
    )
    assert bearer.status_code == 200  # a bearer token works as well as the X-Voice-Token header
    app.later(seconds=599)
    assert (await call.tool("get_context")).status_code == 200
    app.later(seconds=1)
    expired = await call.tool("get_context")
    assert refused(expired) and "expired" in expired.json()["error"]["message"]


async def test_a_token_stops_working_when_its_user_is_forgotten(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    await forget_user(app.runtime.sessions, call.initiation["user_id"], app.runtime.data_stores)
    assert refused(await call.tool("get_memory", query="hello"))
    call.say("user", "are you there?")
    ended = await call.end()
    assert ended.status_code == 200 and ended.json() == {
        "ok": True,
        "stored": False,
        "reason": "the user's memory takes no writes",
    }
    assert await count(app, Conversation) == 0


async def test_call_ended_needs_elevenlabs_signature(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    call.say("user", "I adopted a cat called Miso")
    payload = call.transcription()
    body = json.dumps(payload).encode()
    before = await count(app, Conversation)
    unsigned = await app.http.post("/voice/call-ended", content=body)
    assert refused(unsigned)
    assert refused(await app.agent.deliver(payload, secret="whsec_guess"))
    stale = int(app.clock.now().timestamp()) - 31 * 60
    assert refused(await app.agent.deliver(payload, signed_at=stale))
    # Signed, then changed in transit: the signature covers the exact body.
    good = await _signed_headers(app.agent, body)
    tampered = body.replace(b"Miso", b"Rex!")
    assert refused(await app.http.post("/voice/call-ended", content=tampered, headers=good))
    assert await count(app, Conversation) == before
    fresh = await app.http.post("/voice/call-ended", content=body, headers=good)
    assert fresh.status_code == 200 and fresh.json()["stored"] is True


async def _signed_headers(agent: FakeVoiceAgent, body: bytes) -> dict[str, str]:
    from bench.fakes.voice_agent import elevenlabs_signature

    return {
        "ElevenLabs-Signature": elevenlabs_signature(
            body, agent.webhook_secret, int(agent.clock.now().timestamp())
        )
    }


async def test_one_users_token_never_reaches_another_users_data(open_app: OpenApp) -> None:
    app = await open_app()
    await app.text(ALICE, "My sister Marta is a doctor", first_name="Alice")
    await app.text(ALICE, "Does Marta visit in June?", first_name="Alice")
    await app.text(BOB, "My dog Rex is getting old", first_name="Bob")
    app.later(minutes=20)
    await run_job("close-idle-conversations", app.runtime.jobs)
    assert (await run_job("postprocess", app.runtime.jobs))["processed"] == 2
    alice_call = await app.agent.start(telegram_id=ALICE)
    alice_id = alice_call.initiation["user_id"]
    call = await app.agent.start(telegram_id=BOB)
    bob_id = call.initiation["user_id"]
    assert "Marta" not in json.dumps(call.initiation) and "Rex" in json.dumps(call.initiation)

    context = await call.tool("get_context")
    assert context.status_code == 200
    dumped = json.dumps(context.json())
    assert "Rex" in dumped and "Marta" not in dumped and "Alice" not in dumped
    # Naming Alice in the arguments changes nothing: the user is the token's.
    memory = await call.tool(
        "get_memory", query="Marta sister doctor June", user_id=alice_id, telegram_id=ALICE
    )
    found = memory.json()["result"]
    assert memory.status_code == 200 and found["facts"] == [] and found["conversations"] == []
    assert all("Marta" not in thread for thread in found["threads"])
    saved = await call.tool(
        "update_memory", fact="Bob walks Rex every morning", category="routine", user_id=alice_id
    )
    assert refused(saved, 400, "invalid_arguments")  # "routine" is no category; nothing saved
    saved = await call.tool("update_memory", fact="Bob walks Rex every morning", user_id=alice_id)
    assert saved.status_code == 200 and saved.json()["result"]["category"] == "other"
    # Alice's user id under Bob's session and signature is a forgery.
    _, session, stamp, signature = call.token.split(":")
    assert refused(await call.tool("get_context", token=f"{alice_id}:{session}:{stamp}:{signature}"))

    call.say("user", "Rex chewed my shoes again")
    assert (await call.end()).json()["stored"] is True
    async with app.runtime.sessions() as db:
        owners = dict((await db.execute(select(Conversation.call_id, Conversation.user_id))).all())
        facts = (await db.execute(select(UserFact.user_id, UserFact.content))).all()
    assert owners[call.call_id] == bob_id
    assert (bob_id, "Bob walks Rex every morning") in [tuple(f) for f in facts]
    assert all("Rex" not in content for user, content in facts if user == alice_id)
    # Alice's memory search after Bob's call finds none of Bob's life.
    app.chat.plans.append(
        [("memory_search", {"query": "Rex"}), ("conversation_search", {"query": "Rex shoes"})]
    )
    await app.text(ALICE, "What do you know about Rex?")
    assert app.chat.tool_returns["memory_search"]["facts"] == []
    assert app.chat.tool_returns["conversation_search"]["results"] == []


async def test_expired_tokens_still_name_the_caller_of_a_finished_call(open_app: OpenApp) -> None:
    # The webhook comes after the call, maybe after the token's life: its signature authenticates it.
    app = await open_app(voice_token_ttl_seconds=60)
    await app.text(ALICE, "hello")
    call = await app.agent.start(telegram_id=ALICE)
    call.say("user", "Long call about the Porto flat", after=3600)
    app.later(minutes=5)
    assert refused(await call.tool("get_context"))
    ended = await call.end()
    assert ended.status_code == 200 and ended.json()["stored"] is True
    assert ended.json()["messages"] == 1


async def test_call_ended_refuses_an_unsigned_request_before_reading_its_body(open_app: OpenApp) -> None:
    from bench.fakes.voice_agent import elevenlabs_signature
    from bot.web.voice import MAX_WEBHOOK_BYTES

    app = await open_app()
    chunk, chunks = 256 * 1024, 2 * MAX_WEBHOOK_BYTES // (256 * 1024)
    read = 0

    async def big_body() -> AsyncIterator[bytes]:
        nonlocal read
        for _ in range(chunks):
            read += 1
            yield b"x" * chunk

    malformed = {"ElevenLabs-Signature": "t=1,v0=not-hex"}
    for headers in ({}, malformed):
        read = 0
        assert refused(await app.http.post("/voice/call-ended", content=big_body(), headers=headers))
        assert read == 0, headers
    # Signed in the right shape, fresh, but too large: read up to the cap, then refused.
    read = 0
    stamp = int(app.clock.now().timestamp())
    shaped = {"ElevenLabs-Signature": elevenlabs_signature(b"{}", app.agent.webhook_secret, stamp)}
    too_large = await app.http.post("/voice/call-ended", content=big_body(), headers=shaped)
    assert refused(too_large, 413, "too_large")
    assert read <= MAX_WEBHOOK_BYTES // chunk + 1 < chunks
