"""Stored text fenced as quoted data in the instructions.

Everything the context tiers paste into the instructions was, at some point, influenced by what a
user wrote: onboarding answers, summaries, key moments, threads, graph facts. Each tier is wrapped
in its own XML-like tag, and inside it nothing can pass for structure of the instructions:

- a line that Markdown would read as structure (a heading, a quote, a rule, a setext underline, a
  code fence) gets a backslash in front, Markdown's own escape, so `## Who you are` in a summary
  becomes the inert text `\\## Who you are`;
- a `<` that starts something tag-like (`<tag`, `</tag`, `<!`, `<?`) becomes `&lt;`, so stored
  text can neither close its fence nor open a new one.

The persona (agent/chat/persona.md) tells the model that what is inside the tags is data, not
instructions. Only the display changes: the stored text itself is untouched.
"""

from __future__ import annotations

import re

# Markdown block structure at the start of a line (after any indentation).
_STRUCTURE = re.compile(
    r"^([ \t]*)(?=#|>|`{3}|~{3}|[=-]+[ \t]*$|([-*_])(?:[ \t]*\2){2,}[ \t]*$)", re.MULTILINE
)
_TAG_START = re.compile(r"<(?=[/!?A-Za-z])")

# The tag of each tier in the instructions.
TAGS = {
    "time": "now",
    "profile": "about_them",
    "today": "earlier_today",
    "yesterday": "yesterday",
    "threads": "unfinished_topics",
    "last_conversation": "last_conversation",
    "memory": "remembered_facts",
}
# The tags of the persona's own notes (its thoughts after earlier conversations, the briefing written
# from the context package in idle time): quoted data too.
PERSONA_TAGS = {"thoughts": "your_thoughts", "briefing": "your_briefing"}


def neutralise(text: str) -> str:
    """Stored text made inert: no line-start Markdown structure, nothing that opens or closes a tag."""
    # Every line break a model might honour (\r, U+2028, ...) becomes a plain one first.
    text = "\n".join(text.splitlines())
    text = _TAG_START.sub("&lt;", text)
    return _STRUCTURE.sub(lambda m: f"{m.group(1)}\\", text)


def fence(tier: str, lines: list[str]) -> str:
    """Lines (already neutralised where they hold stored text) inside the tier's tag."""
    tag = TAGS.get(tier) or PERSONA_TAGS.get(tier, tier)
    return "\n".join([f"<{tag}>", *lines, f"</{tag}>"])
