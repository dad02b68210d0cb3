"""The extraction agent: one closed conversation becomes facts, threads, thoughts and a summary."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, Field, model_validator
from pydantic_ai import Agent
from pydantic_ai.models import Model

from agent.chat.persona import with_name
from agent.core.caching import static_cache_settings
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from agent.core.usage import UsageKind, record_run
from agent.digest.groups import for_owner
from agent.digest.summaries import Line, format_lines, summary_model_settings
from agent.memory.grounding import Claim, Said, dropped, ground, names
from agent.memory.known import Decided, Relation, ShownFact, choose_known, known_line, plan_until
from agent.memory.profile import ProfileFact

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
    """A durable fact about the user, what it is about, the messages it comes from, and how it
    stands against what is already known."""

    text: str = Field(description="One short sentence, naming the user (e.g. 'Ana plays the cello').")
    message_ids: list[int] = Field(
        default_factory=list,
        description="The #ids of the user's own messages that state the fact (never the companion's).",
    )
    agreed_in: int | None = Field(
        default=None,
        description=(
            "Only when the companion proposed the fact and the user agreed: the #id of the user's "
            "message that agrees; otherwise null."
        ),
    )
    relation: Relation = Field(
        default="new",
        description=(
            "Against the known facts: new (none says it), same (one already says it), update (it "
            "changes one: a move, a new job), contradiction (one says the opposite)."
        ),
    )
    known_id: int | None = Field(
        default=None, description="For same, update or contradiction: the id of that known fact."
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

    def decided(self, timezone: str) -> Decided:
        """The fact as the memory stores it (a plan's day read in the user's zone)."""
        until = plan_until(self.valid_until, timezone)
        return Decided(self.text, self.message_ids, self.category, until, self.relation, self.known_id)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: object) -> object:
        # A bare sentence is a fact without sources (what extractions stored before sources existed):
        # it reads, and grounding then leaves it out.
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
  with the #ids of the user's own messages it comes from (the number after # in each `user` line), its
  category, and for a plan with a date the day it is for (valid_until).
  A fact is the user's only when the user said it. What {persona_name} said, guessed or repeated back
  (from what it remembered) is not a fact, and neither is anything in the known facts list: cite only
  `user` lines. When {persona_name} proposed something and the user clearly agreed ("you're a morning
  person, right?" / "yes, always"), give agreed_in, the #id of the user's agreeing line.
- For each fact, compare it with the known facts (their ids are [fact N]): relation "same" with its
  known_id when one already says it (reworded too), "update" when it changes one ("lives in Lisbon",
  now "moved to Porto"), "contradiction" when it says the opposite of one, else "new".
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


KNOWN_HEADING = "Known facts (decide against them; never extract them as new):\n"


def extraction_prompt(
    lines: Sequence[Line],
    open_threads: Sequence[OpenThread],
    *,
    ended_local: str | None = None,
    thoughts: Sequence[ShownThought] = (),
    known: Sequence[ShownFact] = (),
) -> str:
    """The known facts, the conversation, the user's open threads and the persona's unshared
    thoughts, as the extractor reads them.

    `ended_local` ("Thursday 2026-11-26 18:40 (Europe/Paris)") anchors the follow-up times.
    """
    threads = "\n".join(f"- [id {t.id}] ({t.type}) {t.content}" for t in open_threads) or "(none)"
    mind = "\n".join(f"- [id {t.id}] {t.content}" for t in thoughts) or "(none)"
    ended = f"The conversation ended on {ended_local}, the user's local time.\n\n" if ended_local else ""
    return (
        f"{ended}{known_block(known)}Open threads:\n{threads}\n\nThe companion's unshared thoughts:\n"
        f"{mind}\n\nConversation (times in UTC):\n{format_lines(lines)}"
    )


def known_block(known: Sequence[ShownFact]) -> str:
    """The known facts' part of the prompt (nothing when none is shown)."""
    return KNOWN_HEADING + "\n".join(known_line(k) for k in known) + "\n\n" if known else ""


def known_budget(settings: Settings, *, static: str, prompt: str) -> int:
    """The tokens the known facts may take: EXTRACTION_KNOWN_FACTS_TOKENS, and never more than
    EXTRACTION_KNOWN_FACTS_SHARE of the rest of the extraction's input (instructions, prompt and
    output schema)."""
    counter = get_counter()
    rest = counter.count(static) + counter.count(prompt) + _schema_tokens()
    cap = min(settings.extraction_known_facts_tokens, int(settings.extraction_known_facts_share * rest))
    return max(0, cap - counter.count(KNOWN_HEADING) - 1)  # the heading and the blank line after the list


def said_lines(lines: Sequence[Line]) -> dict[int, Said]:
    """The conversation's lines as grounding reads them, by id."""
    return {line.id: Said(line.id, line.role, line.speaker_id, line.speaker) for line in lines}


def _same_members(output: Extraction, lines: Sequence[Line], known: dict[int, str]) -> None:
    """In a group: a decision stands only when the known fact names a member whose lines the new
    fact stands on."""
    said = said_lines(lines)
    for fact in output.user_facts:
        text = known.get(fact.known_id) if fact.known_id is not None else None
        if text is not None and not any(names(text, said[i]) for i in fact.message_ids if i in said):
            fact.relation, fact.known_id = "new", None


@functools.cache
def _schema_tokens() -> int:
    """The output schema's tokens: the model is sent it with every extraction."""
    return get_counter().count(json.dumps(Extraction.model_json_schema()))


def ground_facts(output: Extraction, lines: Sequence[Line], *, group: bool) -> list[str]:
    """Keep the facts that stand on the user's own lines, sourced on those lines only; the reasons
    the others were dropped (agent/memory/grounding.py)."""
    said = said_lines(lines)
    kept: list[ExtractedFact] = []
    reasons: list[str] = []
    for fact in output.user_facts:
        grounded = ground(Claim(fact.text, fact.message_ids, fact.agreed_in), said, group=group)
        if grounded.reason is not None:
            reasons.append(grounded.reason)
            continue
        fact.message_ids = list(grounded.message_ids)
        kept.append(fact)
    output.user_facts = kept
    return reasons


async def extract(
    model: Model | str,
    settings: Settings,
    lines: Sequence[Line],
    open_threads: Sequence[OpenThread],
    *,
    ended_local: str | None = None,
    thoughts: Sequence[ShownThought] = (),
    group: bool = False,
    known: Sequence[ProfileFact] = (),
    language: str | None = None,
    owner: tuple[int, int] | None = None,
    instructions: str = EXTRACTION_INSTRUCTIONS,
    usage: UsageKind = "extraction",
) -> Extraction:
    """One SUMMARY_MODEL call with a timeout and an output cap; raises when the model fails.

    `group`: the conversation is a group chat's, its facts about the members by name
    (agent/digest/groups.py). `known`: the owner's held facts, in the profile's order; those the
    budget holds are shown. `owner`: (owner id, conversation id) for the log of dropped facts.
    Only facts standing on the user's own lines are returned. `instructions` and `usage`: another
    kind of conversation's (agent/digest/imported.py)."""
    static = with_name(for_owner(instructions, group=group), settings.persona_name)
    prompt = extraction_prompt(lines, open_threads, ended_local=ended_local, thoughts=thoughts)
    known_shown = choose_known(
        known,
        [line.content for line in lines if line.role == "user"],
        budget_tokens=known_budget(settings, static=static, prompt=prompt),
        count=get_counter().count,
        language=language,
    )
    if known_shown:
        prompt = extraction_prompt(
            lines, open_threads, ended_local=ended_local, thoughts=thoughts, known=known_shown
        )
    async with asyncio.timeout(settings.summary_timeout_seconds):
        result = await extraction_agent.run(
            prompt,
            model=model,
            instructions=static,
            model_settings=summary_model_settings(settings)
            | static_cache_settings(settings, settings.summary_model, static),
        )
    record_run(usage, result.usage)
    output = result.output
    allowed = {t.id for t in open_threads}
    # The model may only resolve threads it was shown (this user's open ones).
    output.resolved_thread_ids = sorted({i for i in output.resolved_thread_ids if i in allowed})
    shown = {t.id for t in thoughts}
    output.shared_thought_ids = sorted({i for i in output.shared_thought_ids if i in shown})
    # A decision may only name a known fact it was shown (the write checks the id again).
    ids = {k.id for k in known_shown}
    for fact in output.user_facts:
        if fact.relation == "new" or fact.known_id not in ids:
            fact.relation, fact.known_id = "new", None
    reasons = ground_facts(output, lines, group=group)
    if group:  # a member's fact never replaces or repeats another member's
        _same_members(output, lines, {k.id: k.content for k in known_shown})
    owner_id, conversation_id = owner if owner is not None else (0, None)
    dropped(reasons, writer="extraction", owner_id=owner_id, conversation_id=conversation_id)
    return output
