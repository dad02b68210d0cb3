"""Voice notes to text through an OpenAI-compatible /v1/audio/transcriptions endpoint.

Off unless TRANSCRIPTION_URL is set. The audio goes to the configured endpoint only; nothing is
downloaded or run locally.
"""

from __future__ import annotations

import logging

import httpx

from agent.core.settings import Settings
from bot.errors import TranscriptionError

logger = logging.getLogger(__name__)


async def transcribe(settings: Settings, audio: bytes, *, filename: str, mime_type: str) -> str:
    """The words of a voice note; raises TranscriptionError when there are none to be had."""
    assert settings.transcription_url is not None
    headers = {}
    if settings.transcription_api_key is not None:
        headers["Authorization"] = f"Bearer {settings.transcription_api_key.get_secret_value()}"
    try:
        async with httpx.AsyncClient(timeout=settings.transcription_timeout_seconds) as client:
            response = await client.post(
                settings.transcription_url,
                headers=headers,
                data={"model": settings.transcription_model, "response_format": "json"},
                files={"file": (filename, audio, mime_type)},
            )
            response.raise_for_status()
            text = response.json().get("text", "")
    except (httpx.HTTPError, ValueError, AttributeError) as exc:
        raise TranscriptionError(f"transcription failed: {exc!r}") from exc
    if not isinstance(text, str) or not text.strip():
        raise TranscriptionError("the transcript is empty")
    return text.strip()
