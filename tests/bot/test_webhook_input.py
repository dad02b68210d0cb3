"""Whatever body reaches the webhook, the answer is 200 or 400: never a 5xx Telegram would retry.

Bodies that are not JSON, or nest too deep, are a 400. An update whose numbers are out of
Telegram's ranges is stored dead with its reason and acknowledged, and /stats shows it. Text that
UTF-8 cannot encode (a lone surrogate) is stored with U+FFFD and answered.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.core.settings import Settings
from bench.fakes.telegram_api import FakeTelegram
from bot.app import AnyApplication
from bot.services import services_of
from bot.web.app import WEBHOOK_PATH
from tests.bot.conftest import ADMIN, Brain
from tests.bot.delivery_helpers import (
    WEBHOOK_HEADERS,
    eventually,
    inbox_rows,
    running_bot,
    transcript,
    webhook_client,
    webhook_settings,
)

JSON_HEADERS = {**WEBHOOK_HEADERS, "Content-Type": "application/json"}


def body(value: Any) -> bytes:
    """JSON as Telegram writes it: ASCII, with \\u escapes (lone surrogates included)."""
    return json.dumps(value).encode()


async def test_a_body_nested_too_deep_is_a_400_and_stores_nothing(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    async with (
        running_bot(webhook_settings(settings_factory), brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        for deep in (b'{"update_id": 1, "message": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", b"{" * 5):
            response = await http.post(WEBHOOK_PATH, content=deep, headers=JSON_HEADERS)
            assert response.status_code == 400
        assert await inbox_rows(runtime.sessions) == []


@pytest.mark.both_databases
async def test_an_update_id_past_64_bits_is_acknowledged_recorded_dead_and_shown_in_stats(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    async with (
        running_bot(webhook_settings(settings_factory), brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = {**tg.user_message(5, "from nowhere"), "update_id": 2**63}
        for _ in range(2):  # a second delivery is acknowledged too
            assert (
                await http.post(WEBHOOK_PATH, content=body(update), headers=JSON_HEADERS)
            ).status_code == 200
        rows = await inbox_rows(runtime.sessions)
        assert [(r.update_id, r.status, r.outcome, r.payload) for r in rows] == [
            (None, "done", "dead", None)
        ] * 2
        assert rows[0].last_error is not None and "update_id" in rows[0].last_error
        assert brain.chat_calls == [] and tg.messages_to(5) == []
        stats = tg.command(ADMIN, "/stats")
        assert (await http.post(WEBHOOK_PATH, json=stats, headers=WEBHOOK_HEADERS)).status_code == 200
        report = (await tg.wait_for_messages(1, chat_id=ADMIN))[-1].text
    assert "dead updates (kept INBOX_RETENTION_HOURS): 2" in report
    assert "update_id is 9223372036854775808, out of range for an update id" in report


@pytest.mark.parametrize(
    ("where", "value", "reason"),
    [
        (("message", "from", "id"), 2**53, "message.from.id"),
        (("message", "chat", "id"), -(2**63) - 1, "message.chat.id"),
        (("message", "message_id"), 2**31, "message.message_id"),
        (("message", "date"), 10**12, "message.date"),
        (("message", "date"), 1e300, "message.date"),
        (("message", "text"), ["not", "text"], "message.text"),
        (("message",), "x", "message"),
    ],
)
async def test_numbers_and_types_telegram_never_sends_are_stored_dead_under_their_update_id(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    brain: Brain,
    where: tuple[str, ...],
    value: Any,
    reason: str,
) -> None:
    async with (
        running_bot(webhook_settings(settings_factory), brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "odd numbers")
        *parents, last = where
        target = update
        for key in parents:
            target = target[key]
        target[last] = value
        assert (await http.post(WEBHOOK_PATH, content=body(update), headers=JSON_HEADERS)).status_code == 200
        (row,) = await inbox_rows(runtime.sessions)
    stored = (row.update_id, row.status, row.outcome, row.payload)
    assert stored == (update["update_id"], "done", "dead", None)
    assert row.last_error is not None and row.last_error.startswith(reason)
    assert brain.chat_calls == []


@pytest.mark.both_databases
async def test_a_message_with_lone_surrogates_is_stored_with_replacements_and_answered(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> None:
    async with (
        running_bot(webhook_settings(settings_factory), brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        update = tg.user_message(5, "half \ud800 a pair \udfff, whole \U0001f600")
        assert (await http.post(WEBHOOK_PATH, content=body(update), headers=JSON_HEADERS)).status_code == 200
        expected = "half \ufffd a pair \ufffd, whole \U0001f600"
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=5)] == [f"echo: {expected}"]
        assert await transcript(runtime.sessions) == [("user", expected), ("assistant", f"echo: {expected}")]
        assert brain.chat_calls == [expected]


# Text with what Telegram's JSON can carry but UTF-8 cannot: lone surrogates, NULs.
_texts = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(["\ud800", "\udfff", "\x00"])),
    max_size=12,
)
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False),
    _texts,
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=12,
)
_keys = st.sampled_from(
    ["update_id", "message", "edited_message", "callback_query", "from", "chat", "id", "date",
     "text", "message_id", "entities", "type", "reply_to_message", "first_name", "is_bot"]
)  # fmt: skip


@st.composite
def _bodies(draw: st.DrawFn) -> Any:
    """A real-looking text update with some of its fields replaced by anything, or any JSON at all."""
    if draw(st.integers(0, 3)) == 0:
        return draw(_json)
    user = draw(st.integers(1, 50))
    update: dict[str, Any] = {
        "update_id": draw(st.integers(1, 10**6)),
        "message": {
            "message_id": draw(st.integers(1, 10**6)),
            "date": 1_700_000_000,
            "chat": {"id": user, "type": "private", "first_name": "A"},
            "from": {"id": user, "is_bot": False, "first_name": "A"},
            "text": draw(_texts),
        },
    }
    for _ in range(draw(st.integers(0, 3))):
        target = update
        for inner in ("message", "from"):
            if draw(st.booleans()) and isinstance(target.get(inner), dict):
                target = target[inner]
        target[draw(_keys)] = draw(_json)
    return update


@pytest.fixture
async def webhook(
    settings_factory: Callable[..., Settings], tg: FakeTelegram, engine: Any, brain: Brain
) -> AsyncIterator[tuple[AnyApplication, httpx.AsyncClient]]:
    """One bot in webhook mode for every example of a property."""
    settings = webhook_settings(settings_factory, rate_limit_per_minute=10**6, rate_limit_per_day=10**6)
    async with (
        running_bot(settings, brain, webhook=True) as (runtime, app, _),
        webhook_client(app, runtime) as http,
    ):
        yield app, http


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=_bodies())
async def test_any_json_is_answered_200_or_400_without_a_traceback(
    webhook: tuple[AnyApplication, httpx.AsyncClient], caplog: pytest.LogCaptureFixture, value: Any
) -> None:
    app, http = webhook
    caplog.set_level(logging.WARNING)
    caplog.clear()
    response = await http.post(WEBHOOK_PATH, content=body(value), headers=JSON_HEADERS)
    assert response.status_code in (200, 400), (response.status_code, value)
    assert await services_of(app).delivery.dispatcher.drain(within=10)
    faults = [
        r for r in caplog.records if r.levelno >= logging.ERROR or r.exc_info or "Traceback" in r.message
    ]
    assert faults == [], [(r.name, r.getMessage()[:800]) for r in faults]


@pytest.mark.parametrize(
    ("odd", "reason"),
    [({"user_id": 2**53}, "message.chat.id"), ({"date": 10**12}, "message.date")],
)
async def test_polling_stores_what_can_never_succeed_dead_and_moves_on(
    settings_factory: Callable[..., Settings],
    tg: FakeTelegram,
    engine: Any,
    brain: Brain,
    odd: dict[str, int],
    reason: str,
) -> None:
    async with running_bot(settings_factory(onboarding_enabled=False), brain) as (runtime, _, _):
        bad = tg.user_message(odd.get("user_id", 5), "from far away", date=odd.get("date"))
        tg.user_message(6, "next in line")
        assert [m.text for m in await tg.wait_for_messages(1, chat_id=6)] == ["echo: next in line"]
        await eventually(lambda: tg.pending_updates == 0)
        rows = {row.update_id: row for row in await inbox_rows(runtime.sessions)}
    dead = rows[bad["update_id"]]
    assert (dead.status, dead.outcome, dead.payload) == ("done", "dead", None)
    assert dead.last_error is not None and dead.last_error.startswith(reason)
    assert brain.chat_calls == ["next in line"]
