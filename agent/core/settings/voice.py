"""Settings of voice calls: the memory as server tools for an ElevenLabs voice agent."""

from __future__ import annotations

from pydantic import SecretStr

from agent.core.settings.base import SettingsGroup


class VoiceSettings(SettingsGroup):
    """VOICE_* and ELEVENLABS_*."""

    # Voice calls: the memory as server tools for an ElevenLabs voice agent, at /voice/*
    # in the web app; off while VOICE_TOKEN_SECRET is unset. POST /voice/initiate needs
    # VOICE_INITIATE_SECRET as a bearer token; call tokens are HMAC-signed with VOICE_TOKEN_SECRET and
    # expire after VOICE_TOKEN_TTL_SECONDS; /voice/call-ended checks ElevenLabs' post-call webhook
    # signature with ELEVENLABS_WEBHOOK_SECRET and refuses signatures older than the tolerance.
    voice_token_secret: SecretStr | None = None
    voice_initiate_secret: SecretStr | None = None
    voice_token_ttl_seconds: int = 3600
    elevenlabs_webhook_secret: SecretStr | None = None
    elevenlabs_webhook_tolerance_seconds: int = 1800
    elevenlabs_agent_id: str | None = None
    # Post-process a call as soon as it is stored, so the next text message finds it in today's summary.
    voice_postprocess_at_once: bool = True
