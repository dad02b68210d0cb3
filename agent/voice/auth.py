"""Call tokens and ElevenLabs webhook signatures: who a voice request speaks for, checked in constant time.

A call token is `user:session:timestamp:signature`: the user id, a random session id, the issue
time (unix seconds) and the hex HMAC-SHA256 of the first three parts under VOICE_TOKEN_SECRET. It
needs no storage: the signature binds the user, the timestamp bounds its life.

ElevenLabs signs post-call webhooks with `ElevenLabs-Signature: t=<unix seconds>,v0=<hex>`, where
the hex is the HMAC-SHA256 of `"<t>.<raw body>"` under the webhook's secret (the scheme of its
SDKs' `construct_event`); a signature older than the tolerance is refused, so a captured request
cannot be replayed later.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from agent.core.errors import VoiceAuthError

# A token stamped this far in the future (clock skew between instances) is still accepted.
CLOCK_SKEW = timedelta(seconds=60)


def _hmac_hex(key: str, message: str) -> str:
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()


@dataclass(frozen=True)
class CallToken:
    """A verified call token: whose call, which session, when it was issued."""

    user_id: int
    token_id: str
    issued_at: datetime
    raw: str


class CallTokens:
    """Issues and verifies call tokens under one secret."""

    def __init__(self, secret: str, *, ttl: timedelta) -> None:
        if not secret:
            raise ValueError("a call token secret must not be empty")
        self._secret = secret
        self.ttl = ttl

    def issue(self, user_id: int, now: datetime) -> CallToken:
        """A fresh token with a new random token id."""
        token_id = secrets.token_hex(16)
        stamp = int(now.timestamp())
        payload = f"{user_id}:{token_id}:{stamp}"
        raw = f"{payload}:{_hmac_hex(self._secret, payload)}"
        return CallToken(user_id, token_id, datetime.fromtimestamp(stamp, UTC), raw)

    def expires_at(self, token: CallToken) -> datetime:
        """When the token stops opening the server tools."""
        return token.issued_at + self.ttl

    def verify(self, raw: str | None, now: datetime, *, check_expiry: bool = True) -> CallToken:
        """The token's claims when its signature holds (and, by default, it has not expired)."""
        if not raw:
            raise VoiceAuthError("missing call token")
        parts = raw.strip().split(":")
        if len(parts) != 4:
            raise VoiceAuthError("malformed call token")
        user, token_id, stamp, signature = parts
        expected = _hmac_hex(self._secret, f"{user}:{token_id}:{stamp}")
        # Constant time, and before any parsing that could answer faster for some forgeries.
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            raise VoiceAuthError("bad call token signature")
        try:
            token = CallToken(int(user), token_id, datetime.fromtimestamp(int(stamp), UTC), raw.strip())
        except (ValueError, OverflowError, OSError) as exc:
            raise VoiceAuthError("malformed call token") from exc
        if check_expiry:
            if token.issued_at > now + CLOCK_SKEW:
                raise VoiceAuthError("call token issued in the future")
            if now >= self.expires_at(token):
                raise VoiceAuthError("call token expired")
        return token


@dataclass(frozen=True)
class WebhookSignature:
    """An ElevenLabs-Signature header of the right shape and a fresh time: what the body must match."""

    stamp: str
    digest: str


# The signature is a hex HMAC-SHA256 (64 digits); the time unix seconds.
_DIGEST = re.compile(r"[0-9a-fA-F]{64}")
_STAMP = re.compile(r"[0-9]{1,11}")


def webhook_signature(header: str | None, now: datetime, tolerance: timedelta) -> WebhookSignature:
    """The header's time and digest, checked before the body is read: `VoiceAuthError` unless it is
    present, shaped `t=<unix seconds>,v0=<64 hex digits>` and dated within the tolerance window."""
    if not header:
        raise VoiceAuthError("missing ElevenLabs-Signature header")
    fields = dict(part.strip().split("=", 1) for part in header.split(",") if "=" in part)
    stamp, given = fields.get("t"), fields.get("v0")
    if not stamp or not given:
        raise VoiceAuthError("ElevenLabs-Signature lacks t= or v0=")
    if not _STAMP.fullmatch(stamp) or not _DIGEST.fullmatch(given):
        raise VoiceAuthError("malformed ElevenLabs-Signature")
    try:
        signed_at = datetime.fromtimestamp(int(stamp), UTC)
    except (ValueError, OverflowError, OSError) as exc:
        raise VoiceAuthError("malformed ElevenLabs-Signature") from exc
    if signed_at < now - tolerance or signed_at > now + CLOCK_SKEW:
        raise VoiceAuthError("webhook signature outside the tolerance window")
    return WebhookSignature(stamp, given.lower())


def verify_webhook(body: bytes, header: str | None, secret: str, now: datetime, tolerance: timedelta) -> None:
    """Raise `VoiceAuthError` unless `header` is ElevenLabs' fresh signature of exactly `body`."""
    signature = webhook_signature(header, now, tolerance)
    try:
        text = body.decode()
    except UnicodeDecodeError as exc:
        raise VoiceAuthError("malformed ElevenLabs-Signature or body") from exc
    expected = _hmac_hex(secret, f"{signature.stamp}.{text}")
    if not hmac.compare_digest(signature.digest.encode(), expected.encode()):
        raise VoiceAuthError("bad webhook signature")
