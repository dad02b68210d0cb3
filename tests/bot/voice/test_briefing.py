"""A call served by context engine v2: /voice/initiate's prompt and get_context carry the briefing's
voice variant, written in idle time from the same package."""

from __future__ import annotations

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from jobs.briefing_refresh import refresh_briefing
from jobs.context import JobContext

from .conftest import OpenApp

ALICE = 711
VOICE = "Alice is moving to Porto next week. She sounds tired but happy. Ask about the boxes."


def briefer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """SUMMARY_MODEL writing the briefing."""
    tool = info.output_tools[0]
    output = {
        "who": "Alice, moving to Porto next week.",
        "today": "She is packing.",
        "approach": "Light and encouraging.",
        "follow_up": [],
        "voice": VOICE,
    }
    return ModelResponse(parts=[ToolCallPart(tool.name, output)])


async def test_a_v2_call_speaks_from_the_voice_briefing(open_app: OpenApp) -> None:
    app = await open_app(context_engine="v2")
    await app.text(ALICE, "Good morning", first_name="Alice")
    call = await app.agent.start(telegram_id=ALICE)
    user_id = call.initiation["user_id"]
    # No briefing yet: the call gets v1's tiers, and says so.
    before = (await call.tool("get_context")).json()["result"]
    assert (before["engine"], before["briefing"]) == ("v1", None)

    runtime = app.runtime
    jobs = JobContext(
        settings=runtime.settings,
        engine=runtime.engine,
        sessions=runtime.sessions,
        clock=app.clock,
        summary_model=FunctionModel(briefer),
        worker_id="worker-a",
    )
    assert await refresh_briefing(jobs, user_id, trigger="nightly") == "written"

    call = await app.agent.start(telegram_id=ALICE)
    prompt = call.initiation["system_prompt"]
    assert (
        f"<your_briefing>\nYour briefing for this conversation (your own notes):\n{VOICE}\n</your_briefing>"
        in (prompt)
    )
    assert "Who they are now" not in prompt  # the text variant is for text turns
    context = (await call.tool("get_context")).json()["result"]
    assert (context["engine"], context["briefing"]) == ("v2", VOICE)
    assert context["user"]["name"] == "Alice"
