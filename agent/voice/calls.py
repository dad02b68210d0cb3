"""Reading ElevenLabs' post-call webhook: which call, whose, and what was said when.

A `post_call_transcription` event carries `data.conversation_id` (the call id), `data.transcript`
(turns with `role` "user" or "agent", `message`, `time_in_call_secs`), `data.metadata`
(`start_time_unix_secs`, `call_duration_secs`) and `data.conversation_initiation_client_data`
(the dynamic variables the call started with, our call token among them). Other event types
(`post_call_audio`, `call_initiation_failure`) are acknowledged and left alone.

Times are bounded before any arithmetic: instants are Unix seconds from 1970 to 9999-12-01, spans
(a call's duration, a turn's offset) at most a week, finite. Outside that a payload is refused (400).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.core.errors import VoiceRequestError
from agent.turn.call_turn import FinishedCall, SpokenTurn

TRANSCRIPTION = "post_call_transcription"
# The dynamic variables /voice/initiate hands out; the token says whose call it was.
TOKEN_VARIABLE = "secret__nikita_token"
SESSION_VARIABLE = "nikita_session_id"
_ROLES: dict[str, Literal["user", "assistant"]] = {"user": "user", "agent": "assistant"}
# Far longer than any call; with LATEST a call still ends on a day the timeline can show.
MAX_CALL_SECONDS = 7 * 24 * 3600
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(9999, 12, 1, tzinfo=UTC)
_UNIX_MAX = int(LATEST.timestamp())


class _Wire(BaseModel):
    # ElevenLabs adds fields over time ("ensure your endpoint can handle the extra fields").
    model_config = ConfigDict(extra="ignore")


class _Turn(_Wire):
    role: str
    message: str | None = None
    # Negative offsets count as the call's start (see parse_post_call).
    time_in_call_secs: float = Field(default=0, le=MAX_CALL_SECONDS, allow_inf_nan=False)


class _Metadata(_Wire):
    start_time_unix_secs: int | None = Field(default=None, ge=0, le=_UNIX_MAX)
    call_duration_secs: float | None = Field(default=None, ge=0, le=MAX_CALL_SECONDS, allow_inf_nan=False)


class _Initiation(_Wire):
    dynamic_variables: dict[str, Any] = Field(default_factory=dict)


class _Data(_Wire):
    conversation_id: str = Field(min_length=1, max_length=128)
    transcript: list[_Turn] = Field(default_factory=list)
    metadata: _Metadata = Field(default_factory=_Metadata)
    conversation_initiation_client_data: _Initiation | None = None


class _Event(_Wire):
    type: str
    event_timestamp: int | None = Field(default=None, ge=0, le=_UNIX_MAX)
    data: dict[str, Any] = Field(default_factory=dict)


@dataclass(frozen=True)
class EndedCall(FinishedCall):
    """A finished call as its webhook tells it: what is stored, and the token the call started with."""

    token: str | None
    token_id: str | None


def _when(unix: float) -> datetime:
    return datetime.fromtimestamp(unix, UTC)


def parse_post_call(payload: object, now: datetime) -> EndedCall | None:
    """The call in a post-call webhook; None for event types that carry no transcript."""
    try:
        event = _Event.model_validate(payload)
        if event.type != TRANSCRIPTION:
            return None
        data = _Data.model_validate(event.data)
    except ValidationError as exc:
        raise VoiceRequestError("bad_payload", f"not a post-call webhook: {exc.errors()[0]['msg']}") from exc
    duration = data.metadata.call_duration_secs
    if data.metadata.start_time_unix_secs is not None:
        started = _when(data.metadata.start_time_unix_secs)
    elif event.event_timestamp is not None:
        started = _when(event.event_timestamp - (duration or 0))
    else:
        started = now - timedelta(seconds=duration or 0)
    if not EPOCH <= started <= LATEST:
        raise VoiceRequestError("bad_payload", "the call starts outside 1970 to 9999")
    turns = tuple(
        SpokenTurn(
            _ROLES[t.role], t.message.strip(), started + timedelta(seconds=max(t.time_in_call_secs, 0))
        )
        for t in data.transcript
        if t.role in _ROLES and t.message and t.message.strip()
    )
    ended = started + timedelta(seconds=duration or 0)
    if turns:
        ended = max(ended, turns[-1].at)
    variables = data.conversation_initiation_client_data
    dynamic = variables.dynamic_variables if variables is not None else {}
    token, session = dynamic.get(TOKEN_VARIABLE), dynamic.get(SESSION_VARIABLE)
    return EndedCall(
        call_id=data.conversation_id,
        token=token if isinstance(token, str) else None,
        token_id=session if isinstance(session, str) else None,
        started_at=started,
        ended_at=ended,
        turns=turns,
    )
