"""What a stopped run leaves: the text written so far, and a history ending in a complete answer."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agent.turn.stopped import STOPPED_NOTE, stopped_exchange

AT = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)
ASKED = ModelRequest(parts=[UserPromptPart("Who is Maya?")])


def test_stopped_before_the_request_went_out() -> None:
    written, messages = stopped_exchange([], "Who is Maya?", AT)
    assert written == ""
    assert messages == [
        ModelRequest(parts=[UserPromptPart("Who is Maya?", timestamp=AT)]),
        ModelResponse(parts=[TextPart(STOPPED_NOTE)], timestamp=AT),
    ]


def test_stopped_mid_stream_keeps_the_text_and_drops_a_half_streamed_tool_call() -> None:
    cut = ModelResponse(
        parts=[TextPart("Maya is your "), ToolCallPart("memory_search", '{"que')], state="interrupted"
    )
    written, messages = stopped_exchange([ASKED, cut], "Who is Maya?", AT)
    assert written == "Maya is your"
    assert messages == [
        ASKED,
        ModelResponse(parts=[TextPart(f"Maya is your\n\n{STOPPED_NOTE}")], timestamp=AT),
    ]


def test_stopped_while_tools_ran_drops_that_round_and_keeps_the_finished_ones() -> None:
    first_call = ModelResponse(parts=[ToolCallPart("memory_search", {"query": "Maya"}, tool_call_id="a")])
    first_return = ModelRequest(parts=[ToolReturnPart("memory_search", "sister", tool_call_id="a")])
    second_call = ModelResponse(
        parts=[
            TextPart("Let me look."),
            ToolCallPart("conversation_search", {"query": "Maya"}, tool_call_id="b"),
        ]
    )
    unfinished = ModelRequest(parts=[], state="interrupted")
    history = [ASKED, first_call, first_return, second_call, unfinished]
    written, messages = stopped_exchange(history, "Who is Maya?", AT)
    assert written == "Let me look."
    assert messages == [
        ASKED,
        first_call,
        first_return,
        ModelResponse(parts=[TextPart(f"Let me look.\n\n{STOPPED_NOTE}")], timestamp=AT),
    ]
