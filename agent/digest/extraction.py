"""The extraction agent: one closed conversation becomes facts, threads, thoughts and a summary."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_ai import Agent
from pydantic_ai.models import Model

from agent.chat.persona import with_name
from agent.core.caching import static_cache_settings
from agent.core.settings import Settings
from agent.core.usage import record_run
from agent.digest.groups import for_owner
from agent.digest.summaries import Line, format_lines, summary_model_settings

ThreadType = Literal["follow_up", "question", "promise", "topic", "curiosity", "callback"]


class NewThread(BaseModel):
    """Something to come back to later."""

    type: ThreadType
    content: str = Field(description="One sentence: what to follow up, ask, keep, or call back to.")
    follow_up_at: str | None = Field(
        default=None,
        description=(
            "When the companion should come back to it first, as local 'YYYY-MM-DD HH:MM' in the "
            "user's time zone, only when the conversation gives a natural moment (the day after an "
            "event, the evening after a date); otherwise null."
        ),
    )


FactCategory = Literal["identity", "people", "health", "preference", "plan", "other"]


class ExtractedFact(BaseModel):
    """A durable fact about the user, what it is about, and the messages it comes from."""

    text: str = Field(description="One short sentence, naming the user (e.g. 'Ana plays the cello').")
    message_ids: list[int] = Field(
        default_factory=list, description="The #ids of the conversation's messages that state the fact."
    )
    category: FactCategory | None = Field(
        default=None,
        description=(
            "identity (name, where they live, work, age), people (family, partner, friends, pets), "
            "health (health, diet, boundaries), preference (likes, dislikes, how they want to be "
            "treated), plan (something they will do), other."
        ),
    )
    valid_until: str | None = Field(
        default=None,
        description="For a plan with a date: the last local day it holds, as YYYY-MM-DD; otherwise null.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        # A bare sentence is a fact without sources (what extractions stored before sources existed).
        return {"text": value} if isinstance(value, str) else value


class EmotionalMarker(BaseModel):
    """An emotion the user showed."""

    emotion: str
    intensity: float = Field(description="0 (barely) to 1 (very strong).")
    context: str = ""


class Extraction(BaseModel):
    """The typed result of post-processing one conversation."""

    user_facts: list[ExtractedFact] = Field(default_factory=list, description="Durable facts about the user.")
    threads_to_open: list[NewThread] = Field(default_factory=list)
    resolved_thread_ids: list[int] = Field(
        default_factory=list, description="Ids of the listed open threads this conversation resolved."
    )
    thoughts: list[str] = Field(default_factory=list, description="The companion's own thoughts for later.")
    shared_thought_ids: list[int] = Field(
        default_factory=list,
        description="Ids of the listed thoughts the companion shared or asked about in this conversation.",
    )
    emotional_markers: list[EmotionalMarker] = Field(default_factory=list)
    key_moments: list[str] = Field(default_factory=list)
    summary: str = Field(description="Two to four sentences about the conversation.")
    tone: str = Field(description="One or two words, e.g. warm, tense, playful.")


@dataclass(frozen=True)
class OpenThread:
    """An open thread shown to the extractor so it can say which ones were resolved."""

    id: int
    type: str
    content: str


@dataclass(frozen=True)
class ShownThought:
    """A thought the persona had on its mind, shown to the extractor so it can say which were shared."""

    id: int
    content: str


EXTRACTION_INSTRUCTIONS = """\
You read one finished conversation between a user and {persona_name}, a companion, and extract memory.
- user_facts: durable facts or preferences about the user (not passing moods), each one short sentence,
  with the #ids of the messages it comes from (the number after # in each line), its category, and
  for a plan with a date the day it is for (valid_until).
- threads_to_open: things to follow up, questions left open, promises made, topics, curiosities, callbacks.
- follow_up_at on a thread: the local moment to check in first, when one is natural ("my interview is on
  Thursday" -> Friday afternoon; "I'll tell you how the date goes" -> the next evening); otherwise null.
- resolved_thread_ids: ids from the open threads list that this conversation settled; only those ids.
- thoughts: what {persona_name} might think about or want to share later.
- shared_thought_ids: ids from the companion's unshared thoughts that {persona_name} shared or asked
  about in this conversation; only those ids.
- emotional_markers, key_moments, a short summary and the overall tone.
Use only what the conversation says. Empty lists are fine.
"""

extraction_agent: Agent[None, Extraction] = Agent(
    output_type=Extraction,
    name="extraction",
    defer_model_check=True,
)


def extraction_prompt(
    lines: Sequence[Line],
    open_threads: Sequence[OpenThread],
    *,
    ended_local: str | None = None,
    thoughts: Sequence[ShownThought] = (),
) -> str:
    """The conversation, the user's open threads and the persona's unshared thoughts, as the
    extractor reads them.

    `ended_local` ("Thursday 2026-11-26 18:40 (Europe/Paris)") anchors the follow-up times.
    """
    threads = "\n".join(f"- [id {t.id}] ({t.type}) {t.content}" for t in open_threads) or "(none)"
    mind = "\n".join(f"- [id {t.id}] {t.content}" for t in thoughts) or "(none)"
    ended = f"The conversation ended on {ended_local}, the user's local time.\n\n" if ended_local else ""
    return (
        f"{ended}Open threads:\n{threads}\n\nThe companion's unshared thoughts:\n{mind}\n\n"
        f"Conversation (times in UTC):\n{format_lines(lines)}"
    )


async def extract(
    model: Model | str,
    settings: Settings,
    lines: Sequence[Line],
    open_threads: Sequence[OpenThread],
    *,
    ended_local: str | None = None,
    thoughts: Sequence[ShownThought] = (),
    group: bool = False,
) -> Extraction:
    """One SUMMARY_MODEL call with a timeout and an output cap; raises when the model fails.

    `group`: the conversation is a group chat's, its facts about the members by name
    (agent/digest/groups.py)."""
    instructions = for_owner(EXTRACTION_INSTRUCTIONS, group=group)
    async with asyncio.timeout(settings.summary_timeout_seconds):
        result = await extraction_agent.run(
            extraction_prompt(lines, open_threads, ended_local=ended_local, thoughts=thoughts),
            model=model,
            instructions=(static := with_name(instructions, settings.persona_name)),
            model_settings=summary_model_settings(settings)
            | static_cache_settings(settings, settings.summary_model, static),
        )
    record_run("extraction", result.usage)
    output = result.output
    allowed = {t.id for t in open_threads}
    # The model may only resolve threads it was shown (this user's open ones).
    output.resolved_thread_ids = sorted({i for i in output.resolved_thread_ids if i in allowed})
    shown = {t.id for t in thoughts}
    output.shared_thought_ids = sorted({i for i in output.shared_thought_ids if i in shown})
    # A fact keeps only sources from this conversation; a fact whose ids are all wrong stays, unsourced.
    said = {line.id for line in lines}
    for fact in output.user_facts:
        fact.message_ids = sorted({i for i in fact.message_ids if i in said})
    return output
