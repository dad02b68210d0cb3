"""The voice surface's errors: each one maps to one HTTP answer in bot/web/voice.py, never to a 500."""

from __future__ import annotations

from agent.core.errors import NikitaError


class VoiceError(NikitaError):
    """Base of the voice calls' errors."""


class VoiceAuthError(VoiceError):
    """A missing, forged or expired call token or webhook signature (HTTP 401)."""


class VoiceRequestError(VoiceError):
    """A request the voice agent can fix: unknown tool, bad arguments, malformed body (HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class VoiceUserNotFoundError(VoiceError):
    """The user named in /voice/initiate does not exist (HTTP 404)."""
