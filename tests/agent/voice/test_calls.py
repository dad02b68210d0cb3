"""Reading ElevenLabs' post-call webhook into a call: times, speakers, the token, other events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent.core.errors import VoiceRequestError
from agent.voice.calls import parse_post_call

NOW = datetime(2026, 3, 3, 9, 30, tzinfo=UTC)
START = int(datetime(2026, 3, 3, 9, 0, tzinfo=UTC).timestamp())


def payload(**data: object) -> dict[str, object]:
    body: dict[str, object] = {
        "conversation_id": "conv_1",
        "transcript": [
            {"role": "agent", "message": "Hey Ana!", "time_in_call_secs": 0},
            {"role": "user", "message": "  I got the job in Porto  ", "time_in_call_secs": 4},
            {"role": "agent", "message": None, "time_in_call_secs": 6, "tool_calls": [{"tool_name": "x"}]},
            {"role": "user", "message": "   ", "time_in_call_secs": 7},
            {"role": "agent", "message": "Congratulations!", "time_in_call_secs": 9, "interrupted": True},
        ],
        "metadata": {"start_time_unix_secs": START, "call_duration_secs": 12, "cost": 5},
        "conversation_initiation_client_data": {
            "dynamic_variables": {"secret__nikita_token": "1:s:2:sig", "nikita_session_id": "s"}
        },
        "analysis": {"call_successful": "success"},
    }
    body.update(data)
    return {"type": "post_call_transcription", "event_timestamp": START + 20, "data": body}


def test_turns_keep_their_speaker_and_time_and_skip_what_was_not_said() -> None:
    call = parse_post_call(payload(), NOW)
    assert call is not None
    start = datetime.fromtimestamp(START, UTC)
    assert [(t.role, t.text, t.at - start) for t in call.turns] == [
        ("assistant", "Hey Ana!", timedelta(0)),
        ("user", "I got the job in Porto", timedelta(seconds=4)),
        ("assistant", "Congratulations!", timedelta(seconds=9)),
    ]
    assert (call.call_id, call.token, call.token_id) == ("conv_1", "1:s:2:sig", "s")
    assert (call.started_at, call.ended_at) == (start, start + timedelta(seconds=12))


def test_without_a_start_time_the_event_time_and_duration_place_the_call() -> None:
    call = parse_post_call(payload(metadata={"call_duration_secs": 12}), NOW)
    assert call is not None
    assert call.started_at == datetime.fromtimestamp(START + 8, UTC)
    call = parse_post_call({**payload(metadata={}), "event_timestamp": None}, NOW)
    assert call is not None and call.started_at == NOW and call.token == "1:s:2:sig"


def test_other_events_are_not_calls_and_malformed_ones_are_refused() -> None:
    assert parse_post_call({"type": "post_call_audio", "data": {"full_audio": "..."}}, NOW) is None
    assert parse_post_call({"type": "call_initiation_failure", "data": {}}, NOW) is None
    for bad in ({"data": {}}, payload(conversation_id=""), payload(transcript="words"), [1, 2]):
        with pytest.raises(VoiceRequestError):
            parse_post_call(bad, NOW)
    missing = payload(conversation_initiation_client_data=None)
    call = parse_post_call(missing, NOW)
    assert call is not None and call.token is None
