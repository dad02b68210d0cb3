"""A property of the whole web app: whatever a client sends to the voice endpoints or the timeline
API (any JSON shape, deep nesting, huge numbers, floats, lone surrogates, Unicode digits, any path
segment), signed in or not, the answer is below 500 and nothing is logged with a traceback."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import update

from bench.fakes.telegram_webapp import sign_init_data
from bench.fakes.voice_agent import FakeCall
from db.models import User
from tests.bot.conftest import TOKEN

from .conftest import INITIATE_SECRET, OpenApp, VoiceApp

ALICE = 703
BIG_INTS = [2**31, 2**63 - 1, 2**63, -(2**63) - 1, 2**64, 2**70, 10**20, -(10**20)]
ODD_STRINGS = [
    "\ud800",
    "a\udfffb",
    "\ud83d\ude00",
    "²",
    "١٢٣",
    "７",
    "9" * 5000,
    "-0",
    " 1",
    "1e3",
    "0001-01-01",
    "9999-12-31",
    "2026-02-30",
    "",
]
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.sampled_from(BIG_INTS),
    st.floats(),  # NaN and the infinities too: json.dumps writes them, json.loads reads them
    st.text(max_size=12),
    st.sampled_from(ODD_STRINGS),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


def _nested(depth: int, kind: str) -> bytes:
    if kind == "array":
        return b"[" * depth + b"]" * depth
    return b'{"a":' * depth + b"1" + b"}" * depth


raw_bodies = st.one_of(
    values.map(lambda v: json.dumps(v).encode()),
    st.builds(_nested, st.integers(60, 100_000), st.sampled_from(["array", "object"])),
    st.binary(max_size=40),
    st.just(b'{"telegram_id": ' + b"9" * 5000 + b"}"),
    st.just(b'{"user_id": 1e400}'),
)
id_bodies = st.builds(
    lambda key, v: json.dumps({key: v}).encode(), st.sampled_from(["user_id", "telegram_id"]), values
)
tool_bodies = st.builds(
    lambda q, n, f, c: json.dumps({"query": q, "limit": n, "fact": f, "category": c}).encode(),
    values,
    values,
    values,
    values,
)
segments = st.one_of(
    st.text(max_size=12),
    st.sampled_from(ODD_STRINGS),
    st.integers().map(str),
    st.sampled_from(BIG_INTS).map(str),
    st.dates().map(lambda d: d.isoformat()),
)
# Where a mutation lands in a real post-call webhook (paths into the payload).
WEBHOOK_PATHS: list[tuple[str | int, ...]] = [
    (),
    ("type",),
    ("event_timestamp",),
    ("data",),
    ("data", "conversation_id"),
    ("data", "transcript"),
    ("data", "transcript", 0),
    ("data", "transcript", 0, "message"),
    ("data", "transcript", 0, "role"),
    ("data", "transcript", 0, "time_in_call_secs"),
    ("data", "metadata"),
    ("data", "metadata", "start_time_unix_secs"),
    ("data", "metadata", "call_duration_secs"),
    ("data", "conversation_initiation_client_data"),
    ("data", "conversation_initiation_client_data", "dynamic_variables"),
    ("data", "conversation_initiation_client_data", "dynamic_variables", "secret__nikita_token"),
]

requests = st.one_of(
    st.tuples(st.just("initiate"), st.one_of(raw_bodies, id_bodies)),
    st.tuples(
        st.just("tool"),
        st.sampled_from(["get_context", "get_memory", "update_memory", "nope", "%C2%B2"]),
        st.one_of(raw_bodies, tool_bodies),
    ),
    st.tuples(st.just("ended"), st.sampled_from(WEBHOOK_PATHS), values),
    st.tuples(st.just("ended_raw"), raw_bodies),
    st.tuples(
        st.just("timeline"),
        st.sampled_from(
            [
                "GET /timeline/api/messages/{}",
                "GET /timeline/api/summaries/{}",
                "GET /timeline/api/days/{}",
                "POST /timeline/api/days/{}/regenerate",
                "GET /timeline/api/search?q=cat&scope=day&day={}",
                "GET /timeline/api/search?q={}&scope=all",
            ]
        ),
        segments,
        st.booleans(),  # signed in
    ),
)


@dataclass
class Target:
    """The app, a started call and signed-in headers for a user east of UTC."""

    app: VoiceApp
    call: FakeCall
    timeline_headers: dict[str, str]


@pytest.fixture
async def target(open_app: OpenApp) -> AsyncIterator[Target]:
    app = await open_app(voice_postprocess_at_once=False)
    await app.text(ALICE, "I adopted a cat called Miso")
    async with app.runtime.sessions() as session, session.begin():
        await session.execute(update(User).values(timezone="Pacific/Kiritimati"))  # UTC+14
    call = await app.agent.start(telegram_id=ALICE)
    call.say("user", "Miso sleeps all day")
    init = sign_init_data(
        TOKEN, user={"id": ALICE, "first_name": "Alice"}, auth_date=int(app.clock.now().timestamp())
    )
    yield Target(app, call, {"Authorization": f"tma {init}"})


def _signature(body: bytes, secret: str, stamp: int) -> str:
    # ElevenLabs' scheme over the raw bytes, so a body that is not UTF-8 can be signed too.
    digest = hmac.new(secret.encode(), f"{stamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={stamp},v0={digest}"


def _mutated(payload: Any, path: tuple[str | int, ...], value: object) -> Any:
    if not path:
        return value
    changed = copy.deepcopy(payload)
    holder = changed
    for step in path[:-1]:
        holder = holder[step]
    holder[path[-1]] = value
    return changed


async def _send(target: Target, request: tuple[Any, ...]) -> httpx.Response:
    http = target.app.http
    kind = request[0]
    if kind == "initiate":
        return await http.post(
            "/voice/initiate", content=request[1], headers={"Authorization": f"Bearer {INITIATE_SECRET}"}
        )
    if kind == "tool":
        return await http.post(
            f"/voice/server-tool/{request[1]}",
            content=request[2],
            headers={"X-Voice-Token": target.call.token},
        )
    if kind in ("ended", "ended_raw"):
        if kind == "ended":
            body = json.dumps(_mutated(target.call.transcription(), request[1], request[2])).encode()
        else:
            body = request[1]
        stamp = int(target.app.clock.now().timestamp())
        signature = _signature(body, target.app.agent.webhook_secret, stamp)
        return await http.post("/voice/call-ended", content=body, headers={"ElevenLabs-Signature": signature})
    _, template, segment, signed_in = request
    method, path = template.split(" ")
    headers = target.timeline_headers if signed_in else {}
    return await http.request(
        method, path.format(quote(segment.encode("utf-8", "surrogatepass"), safe="")), headers=headers
    )


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(request=requests)
async def test_no_input_makes_a_server_error(
    target: Target, request: tuple[Any, ...], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        answer = await _send(target, request)
    assert answer.status_code < 500, answer.text
    assert not [r for r in caplog.records if r.exc_info], [r.getMessage() for r in caplog.records]
