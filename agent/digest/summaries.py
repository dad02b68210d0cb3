"""The day-summary agent: a day's messages become the hybrid Markdown summary and its key moments."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from pydantic import BaseModel, Field
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agent.chat.persona import with_name
from agent.core.caching import static_cache_settings
from agent.core.model_lifecycle import sampling_allowed
from agent.core.settings import Settings
from agent.core.usage import UsageKind, record_run
from agent.digest.groups import for_owner
from db.models import OTHER

MAX_KEY_MOMENTS = 5


@dataclass(frozen=True)
class Line:
    """One transcript message as the summary and extraction agents see it."""

    id: int
    role: str
    content: str
    sent_at: datetime
    # Who said it in a group chat (the transcript's speaker_name); None in a private chat.
    speaker: str | None = None
    # Their Telegram id (the transcript's speaker_telegram_id): whose words a group's fact stands on.
    speaker_id: int | None = None


class DaySummary(BaseModel):
    """A day in the hybrid format: narrative plus fixed sections."""

    summary: str = Field(description="A short narrative of the day so far, third person, past tense.")
    goals: list[str] = Field(default_factory=list, description="Goals the user mentioned.")
    decisions: list[str] = Field(default_factory=list, description="Decisions made.")
    open_loops: list[str] = Field(default_factory=list, description="Questions or tasks left open.")
    next_steps: list[str] = Field(default_factory=list, description="What comes next.")
    key_moments: list[str] = Field(default_factory=list, description="At most 5 moments worth remembering.")

    def markdown(self) -> str:
        """The stored Markdown block: Summary / Goals / Decisions / Open loops / Next steps."""
        parts = [f"## Summary\n{self.summary.strip()}"]
        for title, items in (
            ("Goals", self.goals),
            ("Decisions", self.decisions),
            ("Open loops", self.open_loops),
            ("Next steps", self.next_steps),
        ):
            body = "\n".join(f"- {item.strip()}" for item in items if item.strip()) or "- none"
            parts.append(f"## {title}\n{body}")
        return "\n\n".join(parts)


SUMMARY_INSTRUCTIONS = """\
You keep the diary of one user's day with a companion called {persona_name}.
Update the day's summary from the previous summary (if any) and the new messages.
Keep everything still true from the previous summary; add what is new; be concise and factual.
Never invent facts. Key moments: at most 5, the most meaningful of the whole day.
"""

day_summary_agent: Agent[None, DaySummary] = Agent(
    output_type=DaySummary,
    name="day-summary",
    defer_model_check=True,
)


def summary_model_settings(settings: Settings) -> ModelSettings:
    """Low temperature (where the model takes one), an output cap and a timeout (SUMMARY_* settings)."""
    model_settings = ModelSettings(
        max_tokens=settings.summary_max_tokens, timeout=settings.summary_timeout_seconds
    )
    if sampling_allowed(settings.summary_model):
        model_settings["temperature"] = settings.summary_temperature
    return model_settings


def format_lines(lines: Sequence[Line]) -> str:
    """Messages as `[#id HH:MM role] text` lines; a group member's as `[#id HH:MM user] Ana: text`;
    another assistant's in an imported conversation by its name, `[#id HH:MM ChatGPT] text`."""
    return "\n".join(
        f"[#{line.id} {line.sent_at:%H:%M} {line.speaker}] {line.content}"
        if line.role == OTHER and line.speaker
        else f"[#{line.id} {line.sent_at:%H:%M} {line.role}] {_named(line.speaker)}{line.content}"
        for line in lines
    )


def _named(speaker: str | None) -> str:
    return f"{speaker}: " if speaker else ""


def _prompt(day: date, previous: str | None, lines: Sequence[Line], notes: Sequence[str], final: bool) -> str:
    sections = [f"Day: {day.isoformat()}" + (" (the day is over: write the final summary)" if final else "")]
    sections.append("Previous summary:\n" + (previous or "(none yet)"))
    if notes:
        sections.append("Conversation summaries from post-processing:\n" + "\n".join(f"- {n}" for n in notes))
    sections.append("New messages:\n" + (format_lines(lines) or "(none)"))
    return "\n\n".join(sections)


async def summarise_day(
    model: Model | str,
    settings: Settings,
    *,
    day: date,
    previous: str | None,
    lines: Sequence[Line],
    notes: Sequence[str] = (),
    final: bool = False,
    group: bool = False,
    instructions: str = SUMMARY_INSTRUCTIONS,
    usage: UsageKind = "day_summary",
) -> DaySummary:
    """One SUMMARY_MODEL call: the updated summary of `day` (raises on model failure or timeout).

    `group`: the day is a group chat's (agent/digest/groups.py). `instructions` and `usage`: another
    kind of day's (agent/digest/imported.py)."""
    instructions = for_owner(instructions, group=group)
    async with asyncio.timeout(settings.summary_timeout_seconds):
        result = await day_summary_agent.run(
            _prompt(day, previous, lines, notes, final),
            model=model,
            instructions=(static := with_name(instructions, settings.persona_name)),
            model_settings=summary_model_settings(settings)
            | static_cache_settings(settings, settings.summary_model, static),
        )
    record_run(usage, result.usage)
    output = result.output
    output.key_moments = [m for m in output.key_moments if m.strip()][:MAX_KEY_MOMENTS]
    return output
