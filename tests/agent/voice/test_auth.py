"""Call tokens and ElevenLabs webhook signatures: what passes, what is refused, and why."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.core.errors import VoiceAuthError
from agent.voice.auth import CallTokens, verify_webhook
from bench.fakes.voice_agent import elevenlabs_signature

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
TTL = timedelta(hours=1)
TOLERANCE = timedelta(minutes=30)


def test_a_token_names_its_user_and_session_until_it_expires() -> None:
    tokens = CallTokens("k" * 32, ttl=TTL)
    token = tokens.issue(42, NOW)
    user, session, stamp, signature = token.raw.split(":")
    assert (user, stamp, len(signature)) == ("42", str(int(NOW.timestamp())), 64)
    assert session == token.token_id and len(session) == 32
    checked = tokens.verify(token.raw, NOW + TTL - timedelta(seconds=1))
    assert (checked.user_id, checked.token_id, checked.issued_at) == (42, session, NOW)
    with pytest.raises(VoiceAuthError, match="expired"):
        tokens.verify(token.raw, NOW + TTL)
    # The post-call webhook reads whose call it was from an expired token too (its signature still holds).
    assert tokens.verify(token.raw, NOW + 10 * TTL, check_expiry=False).user_id == 42
    assert tokens.issue(42, NOW).token_id != session


@pytest.mark.parametrize(
    "forge",
    [
        lambda raw: raw.replace("42:", "43:", 1),  # another user
        lambda raw: ":".join([*raw.split(":")[:2], str(int(raw.split(":")[2]) + 3600), raw.split(":")[3]]),
        lambda raw: raw[:-1] + ("0" if raw[-1] != "0" else "1"),  # signature
        lambda raw: raw.rsplit(":", 1)[0],  # no signature
        lambda raw: "",
        lambda raw: raw + ":extra",
    ],
)
def test_a_changed_token_is_refused(forge: object) -> None:
    tokens = CallTokens("k" * 32, ttl=TTL)
    raw = tokens.issue(42, NOW).raw
    with pytest.raises(VoiceAuthError):
        tokens.verify(forge(raw), NOW)  # type: ignore[operator]


def test_a_token_of_another_secret_or_from_the_future_is_refused() -> None:
    ours, theirs = CallTokens("a" * 32, ttl=TTL), CallTokens("b" * 32, ttl=TTL)
    with pytest.raises(VoiceAuthError, match="signature"):
        ours.verify(theirs.issue(42, NOW).raw, NOW)
    with pytest.raises(VoiceAuthError, match="future"):
        ours.verify(ours.issue(42, NOW + timedelta(minutes=5)).raw, NOW)
    with pytest.raises(VoiceAuthError, match="missing"):
        ours.verify(None, NOW)


@given(st.text(max_size=120))
def test_no_made_up_string_passes_for_a_token(raw: str) -> None:
    with pytest.raises(VoiceAuthError):
        CallTokens("k" * 32, ttl=TTL).verify(raw, NOW)


def test_webhook_signatures_follow_elevenlabs_scheme() -> None:
    body = b'{"type": "post_call_transcription", "data": {"text": "ol\xc3\xa1"}}'
    stamp = int(NOW.timestamp())
    header = elevenlabs_signature(body, "whsec", stamp)
    verify_webhook(body, header, "whsec", NOW + timedelta(minutes=29), TOLERANCE)
    refusals = {
        "wrong secret": (body, elevenlabs_signature(body, "other", stamp), NOW),
        "changed body": (body.replace(b"ol", b"hi"), header, NOW),
        "stale": (body, header, NOW + timedelta(minutes=31)),
        "future": (body, elevenlabs_signature(body, "whsec", stamp + 600), NOW),
        "no header": (body, "", NOW),
        "no v0": (body, f"t={stamp}", NOW),
        "garbage": (body, "t=soon,v0=abc", NOW),
    }
    for reason, (sent, given_header, at) in refusals.items():
        with pytest.raises(VoiceAuthError):
            verify_webhook(sent, given_header, "whsec", at, TOLERANCE)
            pytest.fail(reason)
