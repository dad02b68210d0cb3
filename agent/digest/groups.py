"""What the memory prompts say when the conversation is a group chat's, not one person's.

A group chat is a memory owner of its own (agent/account/groups.py) and runs the same extraction,
summaries, briefing and compaction as a person. Their prompts speak of "the user"; for a group
they get one preface, chosen by the owner's kind, that says several members talk there, each line
naming its speaker, and that what the prompt calls the user is the member who said it, by name. A
person's prompts are returned unchanged, byte for byte: the prompt cache keys on them.
"""

from __future__ import annotations

GROUP_PREFACE = """\
This conversation is a group chat, not a private one: several members talk there, with each other \
and with {persona_name}, and each member's message is marked with their name ("Ana: ..."). \
Wherever the instructions below say "the user", "the person" or "they", read the member who said \
it, by name: write every fact, goal, feeling, thread and summary line about that member ("Ana \
plays the cello", "Ben asked ..."), never about "the user" or the group as a whole, and never give \
one member's words to another.

"""


def for_owner(instructions: str, *, group: bool) -> str:
    """The instructions for a group's memory (the preface first), or a person's exactly as given.

    The preface keeps its `{persona_name}` for the caller's own filling-in.
    """
    return GROUP_PREFACE + instructions if group else instructions
