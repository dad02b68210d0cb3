"""The day-summary agent: hybrid Markdown, at most five key moments, the previous summary carried on."""

from __future__ import annotations

from datetime import UTC, date, datetime

from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.settings import Settings
from agent.digest.summaries import DaySummary, Line, summarise_day

SETTINGS = Settings(_env_file=None)  # type: ignore[call-arg]


def test_markdown_has_the_five_sections_in_order() -> None:
    text = DaySummary(summary="A calm day.", goals=["rest"], decisions=[]).markdown()

    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings == ["## Summary", "## Goals", "## Decisions", "## Open loops", "## Next steps"]
    assert "- rest" in text and "## Decisions\n- none" in text


async def test_summary_keeps_five_key_moments_and_sees_the_previous_summary() -> None:
    prompts: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        request = messages[-1]
        assert isinstance(request, ModelRequest)
        prompts.extend(
            p.content for p in request.parts if isinstance(p, UserPromptPart) and isinstance(p.content, str)
        )
        args = {"summary": "Busy day.", "key_moments": [f"moment {i}" for i in range(8)]}
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, args)])

    output = await summarise_day(
        FunctionModel(model),
        SETTINGS,
        day=date(2026, 3, 3),
        previous="## Summary\nMorning run.",
        lines=[Line(5, "user", "lunch with Bo", datetime(2026, 3, 3, 12, 0, tzinfo=UTC))],
        notes=["They talked about lunch."],
        final=True,
    )

    assert output.key_moments == [f"moment {i}" for i in range(5)]
    assert "Morning run." in prompts[0] and "lunch with Bo" in prompts[0]
    assert "They talked about lunch." in prompts[0] and "final summary" in prompts[0]
