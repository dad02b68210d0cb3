"""A small fake ElevenLabs voice agent that runs whole calls against our /voice/* endpoints over HTTP.

It plays every part the platform joins, on the real wire formats:
- the client that starts a call: `POST /voice/initiate` with the operator's bearer secret, then the
  answer's dynamic variables as the call's `conversation_initiation_client_data`;
- the agent during the call: server tools as ElevenLabs webhook tools, the call token taken from the
  secret dynamic variable into the `X-Voice-Token` header, the tool's parameters as the JSON body; a
  tool call shows in the transcript as an agent turn with no message and a `tool_calls` entry;
- the platform after the call: the `post_call_transcription` webhook, signed as ElevenLabs signs it
  (`ElevenLabs-Signature: t=<unix>,v0=<hex HMAC-SHA256 of "<t>.<raw body>">`), computed here
  independently of the app's own code.
Turn times and signature times follow the test's clock.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import httpx

from bench.clock import FrozenClock

Json = dict[str, Any]
TOKEN_VARIABLE = "secret__nikita_token"


def elevenlabs_signature(body: bytes, secret: str, timestamp: int) -> str:
    """The header value ElevenLabs sends with a post-call webhook."""
    digest = hmac.new(secret.encode(), f"{timestamp}.{body.decode()}".encode(), hashlib.sha256).hexdigest()
    return f"t={timestamp},v0={digest}"


@dataclass
class FakeVoiceAgent:
    """One ElevenLabs agent talking to the app at `http`."""

    http: httpx.AsyncClient
    clock: FrozenClock
    initiate_secret: str
    webhook_secret: str
    agent_id: str = "agent_fake_nikita"

    async def initiate(self, **who: Any) -> httpx.Response:
        """The client's `POST /voice/initiate` (who: user_id= or telegram_id=)."""
        headers = {"Authorization": f"Bearer {self.initiate_secret}"}
        return await self.http.post("/voice/initiate", json=who, headers=headers)

    async def start(self, **who: Any) -> FakeCall:
        """Initiate and start a call with the answer's dynamic variables; fails loudly on refusal."""
        answer = await self.initiate(**who)
        assert answer.status_code == 200, answer.text
        started = answer.json()
        return FakeCall(self, dict(started["dynamic_variables"]), started, self.clock.now().timestamp())

    async def deliver(
        self, payload: Json, *, signed_at: int | None = None, secret: str | None = None
    ) -> httpx.Response:
        """POST a webhook payload, signed now (or at `signed_at`) with the webhook secret (or `secret`)."""
        body = json.dumps(payload).encode()
        stamp = int(self.clock.now().timestamp()) if signed_at is None else signed_at
        signature = elevenlabs_signature(body, secret or self.webhook_secret, stamp)
        headers = {"ElevenLabs-Signature": signature, "Content-Type": "application/json"}
        return await self.http.post("/voice/call-ended", content=body, headers=headers)


@dataclass
class FakeCall:
    """One call in progress: what was said and when, and the tools the agent used."""

    agent: FakeVoiceAgent
    dynamic_variables: dict[str, Any]
    initiation: Json
    start_unix: float
    call_id: str = field(default_factory=lambda: f"conv_{uuid.uuid4().hex[:26]}")
    turns: list[Json] = field(default_factory=list)

    @property
    def token(self) -> str:
        """The call token the agent puts in its tool headers."""
        return str(self.dynamic_variables[TOKEN_VARIABLE])

    def _seconds(self) -> int:
        return int(self.agent.clock.now().timestamp() - self.start_unix)

    def say(self, role: str, text: str, *, after: float = 5.0) -> None:
        """`role` ("user" or "agent") says `text`, `after` seconds into the call from the last turn."""
        self.agent.clock.advance(timedelta(seconds=after))
        self.turns.append(self._turn(role, text))

    def _turn(self, role: str, message: str | None, tool_calls: list[Json] | None = None) -> Json:
        return {
            "role": role,
            "message": message,
            "tool_calls": tool_calls or [],
            "tool_results": [],
            "feedback": None,
            "llm_override": None,
            "time_in_call_secs": self._seconds(),
            "conversation_turn_metrics": None,
            "rag_retrieval_info": None,
            "llm_usage": None,
            "interrupted": False,
            "original_message": None,
            "source_medium": "audio",
        }

    async def tool(
        self, name: str, *, token: str | None = None, in_body: bool = False, **params: Any
    ) -> httpx.Response:
        """Call a server tool as an ElevenLabs webhook tool does (`token=` overrides the call's own)."""
        call = {"type": "webhook", "tool_name": name, "params_as_json": json.dumps(params)}
        self.turns.append(self._turn("agent", None, [call]))
        headers = {"X-Voice-Token": self.token if token is None else token}
        if in_body:
            return await self.agent.http.post(
                "/voice/server-tool", json={"tool": name, **params}, headers=headers
            )
        return await self.agent.http.post(f"/voice/server-tool/{name}", json=params, headers=headers)

    def transcription(self) -> Json:
        """The `post_call_transcription` payload of this call as it stands."""
        now = int(self.agent.clock.now().timestamp())
        return {
            "type": "post_call_transcription",
            "event_timestamp": now,
            "data": {
                "agent_id": self.agent.agent_id,
                "conversation_id": self.call_id,
                "status": "done",
                "user_id": None,
                "transcript": list(self.turns),
                "metadata": {
                    "start_time_unix_secs": int(self.start_unix),
                    "accepted_time_unix_secs": int(self.start_unix),
                    "call_duration_secs": self._seconds(),
                    "cost": 321,
                    "termination_reason": "end_call tool was called.",
                    "phone_call": None,
                    "feedback": {"overall_score": None, "likes": 0, "dislikes": 0},
                },
                "analysis": {
                    "evaluation_criteria_results": {},
                    "data_collection_results": {},
                    "call_successful": "success",
                    "transcript_summary": "A friendly call.",
                },
                "conversation_initiation_client_data": {
                    "conversation_config_override": self.initiation.get("conversation_config_override", {}),
                    "custom_llm_extra_body": {},
                    "dynamic_variables": {
                        **self.dynamic_variables,
                        "system__conversation_id": self.call_id,
                        "system__agent_id": self.agent.agent_id,
                    },
                },
                "has_audio": True,
                "has_user_audio": True,
                "has_response_audio": True,
            },
        }

    async def end(self) -> httpx.Response:
        """Hang up: the platform sends the signed post-call webhook."""
        return await self.agent.deliver(self.transcription())
