"""The extraction and day summary of a conversation imported from another assistant's export.

Its lines are the person's (`user`) and the other assistant's (OTHER), shown to the model by that
assistant's name ("ChatGPT"), never as the companion's: the summary tells the day as the person's
talk with ChatGPT, and the facts about the person come from their own lines only (grounding drops a
fact sourced on the assistant's lines, agent/memory/grounding.py). The model calls are metered as
"import", apart from chat (jobs/imports.py paces them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic_ai.models import Model

from agent.core.settings import Settings
from agent.digest.extraction import Extraction, extract
from agent.digest.summaries import Line
from agent.history.imported import source_name
from agent.memory.profile import ProfileFact
from db.models import OTHER, TranscriptMessage

IMPORT_EXTRACTION_INSTRUCTIONS = """\
You read one conversation the user had with another AI assistant (ChatGPT or Claude), before they
met {persona_name}, a companion; it comes from the export they brought. Extract what it tells about
the user.
- Lines marked `user` are the user's own words; lines marked with the assistant's name (ChatGPT,
  Claude) are that assistant's, never the user's and never {persona_name}'s.
- user_facts: durable facts or preferences about the user (not passing moods, not the task they
  asked for help with unless it says something lasting about them), each one short sentence, with
  the #ids of the user's own `user` lines it comes from (cite only `user` lines), its category, and
  for a plan with a date the day it is for (valid_until). What the assistant said, guessed or
  assumed about the user is not a fact ("as a vegetarian you..." is not the user saying so), and
  neither is anything in the known facts list.
- For each fact, compare it with the known facts (their ids are [fact N]): relation "same" with its
  known_id when one already says it (reworded too), "update" when it changes one, "contradiction"
  when it says the opposite of one, else "new".
- Leave threads_to_open, resolved_thread_ids, thoughts and shared_thought_ids empty: the
  conversation is old and was not with {persona_name}.
- emotional_markers, key_moments, and a short summary in the form "The user asked ChatGPT about ..."
  (name the assistant), and the overall tone.
Use only what the conversation says. Empty lists are fine.
"""

IMPORT_SUMMARY_INSTRUCTIONS = """\
You keep the diary of one user's days. This day's new lines come from the user's talks with another
AI assistant (ChatGPT or Claude), brought from its export: lines marked `user` are the user's, lines
marked ChatGPT or Claude are that assistant's. Lines marked `assistant` (rare) are the user's talk
with {persona_name}, their companion. Update the day's summary from the previous summary (if any)
and the new lines; write it in the second person as the user's talks with that assistant ("You asked
ChatGPT about ...", "You told Claude that ..."), never as a talk with {persona_name}, and never take
the assistant's words as facts about the user. Be concise and factual. Key moments: at most 5.
"""


def named_lines(lines: Sequence[Line], kinds: Mapping[int, str]) -> list[Line]:
    """The lines with another assistant's named (`kinds`: each line's conversation kind by line id), so
    the prompt shows it by name (`format_lines`); the person's stay `user`."""
    return [
        Line(line.id, OTHER, line.content, line.sent_at, source_name(kinds.get(line.id, "")))
        if line.role == OTHER
        else line
        for line in lines
    ]


async def extract_imported(
    model: Model | str,
    settings: Settings,
    lines: Sequence[Line],
    *,
    ended_local: str,
    known: Sequence[ProfileFact],
    language: str | None,
    owner: tuple[int, int],
) -> Extraction:
    """The extraction of one imported conversation (`lines` already named), metered as "import"; its
    threads and thoughts are dropped (an old talk with someone else opens nothing)."""
    output = await extract(
        model,
        settings,
        lines,
        (),
        ended_local=ended_local,
        known=known,
        language=language,
        owner=owner,
        instructions=IMPORT_EXTRACTION_INSTRUCTIONS,
        usage="import",
    )
    return output.model_copy(update={"threads_to_open": [], "thoughts": [], "resolved_thread_ids": []})


# How a day's summary names the other assistant's lines when it reads them as stored (a chat
# imported into a live day, or a day rewritten on request).
OTHER_NAME = "another assistant (imported chat)"


def summary_speaker(message: TranscriptMessage) -> str | None:
    """A stored line's speaker for a day's summary: a group member's name, or OTHER_NAME."""
    return message.speaker_name or (OTHER_NAME if message.role == OTHER else None)
