"""Reading BEAM's chats for `bench recall`: each chat folder becomes one LoCoMo-shaped sample.

BEAM ("Beyond a Million Tokens") chats are one person with an assistant: `chat.json` is a list of
batches, each a list of turns of messages (`id`, `role`, `content`, the batch's first user message
carrying a `time_anchor` such as "March-15-2024"); `probing_questions/probing_questions.json` maps
each of BEAM's ten abilities to questions naming their source messages (`source_chat_ids`, a list
or a dict of lists). A batch becomes a session dated by its anchor; each question keeps its
ability and gets the bench category its ability belongs to. The data is read where it was
fetched, never copied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

# BEAM's abilities, in its own order, with the bench category each belongs to (1 multi-hop:
# questions whose sources span sessions; 2 temporal; 3 open-domain: preferences and instructions
# said once and meant later; 4 single-hop).
ABILITIES: dict[str, int] = {
    "abstention": 4,
    "contradiction_resolution": 4,
    "event_ordering": 1,
    "information_extraction": 4,
    "instruction_following": 3,
    "knowledge_update": 4,
    "multi_session_reasoning": 1,
    "preference_following": 3,
    "summarization": 1,
    "temporal_reasoning": 2,
}
USER = "User"
ASSISTANT = "Assistant"
# BEAM marks each user question with its batch and turn ("... ->-> 1,2"); no person writes that.
_MARKER = re.compile(r"\s*->->\s*\d+\s*,\s*\d+\s*$")
_QUESTIONS = Path("probing_questions") / "probing_questions.json"


def is_chat(folder: Path) -> bool:
    """Whether a folder is one BEAM chat (its chat and its probing questions)."""
    return (folder / "chat.json").is_file() and (folder / _QUESTIONS).is_file()


def chat_folders(paths: Sequence[str]) -> list[Path]:
    """The chat folders named: a chat folder itself, or a folder of them (in numeric order)."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if is_chat(path):
            found.append(path)
            continue
        inside = [p for p in path.iterdir() if p.is_dir() and is_chat(p)] if path.is_dir() else []
        if not inside:
            raise ValueError(f"{raw}: not a BEAM chat folder nor a folder of them")
        found += sorted(inside, key=_numbered)
    return found


def _numbered(folder: Path) -> tuple[bool, int, str]:
    """Chat folders "1".."20" in numeric order, any others after them by name."""
    digits = folder.name.isdigit()
    return (not digits, int(folder.name) if digits else 0, folder.name)


def chat_files(folders: Sequence[Path]) -> list[str]:
    """The files a built index depends on."""
    return [str(f / name) for f in folders for name in ("chat.json", str(_QUESTIONS))]


def _anchor(text: str) -> str:
    """BEAM's "March-15-2024" in LoCoMo's time format ("9:00 am on 15 March, 2024")."""
    day = datetime.strptime(text.strip(), "%B-%d-%Y")
    return f"9:00 am on {day.day} {day.strftime('%B')}, {day.year}"


def _sources(value: object) -> list[int]:
    """Source message ids of a question: a list, or a dict of lists (first / second statement...)."""
    if isinstance(value, dict):
        return [i for v in value.values() for i in _sources(v)]
    if isinstance(value, list):
        return [int(v) for v in value if isinstance(v, int) or str(v).isdigit()]
    return []


def load_chat(folder: Path) -> dict[str, Any]:
    """One BEAM chat as a LoCoMo-shaped sample (speaker A the person, B the assistant).

    Each batch is a session at its time anchor (the previous batch's when it has none); a
    message's `dia_id` is `D<batch>:<BEAM id>`, so a question's source ids map to turns. Each
    question keeps its `ability`; questions without sources (abstention) keep an empty evidence.
    """
    batches = json.loads((folder / "chat.json").read_text(encoding="utf-8"))
    conversation: dict[str, Any] = {"speaker_a": USER, "speaker_b": ASSISTANT}
    batch_of: dict[int, int] = {}
    when = "9:00 am on 1 January, 2024"
    for n, batch in enumerate(batches, 1):
        messages = [m for turn in batch.get("turns", []) for m in turn]
        anchors = [m["time_anchor"] for m in messages if m.get("time_anchor")]
        when = _anchor(anchors[0]) if anchors else when
        conversation[f"session_{n}_date_time"] = when
        conversation[f"session_{n}"] = [
            {
                "speaker": USER if m["role"] == "user" else ASSISTANT,
                "dia_id": f"D{n}:{int(m['id'])}",
                "text": _MARKER.sub("", str(m["content"])),
            }
            for m in messages
        ]
        batch_of.update({int(m["id"]): n for m in messages})
    questions = json.loads((folder / _QUESTIONS).read_text(encoding="utf-8"))
    qa: list[dict[str, Any]] = []
    for ability, items in questions.items():
        for item in items:
            ids = _sources(item.get("source_chat_ids"))
            # An id no message has stays visible as dangling evidence rather than vanishing.
            evidence = [f"D{batch_of.get(i, 0)}:{i}" for i in dict.fromkeys(ids)]
            qa.append(
                {
                    "question": str(item["question"]),
                    "evidence": evidence,
                    "category": ABILITIES.get(ability, 4),
                    "ability": ability,
                }
            )
    return {"sample_id": f"beam:{folder.parent.name}/{folder.name}", "conversation": conversation, "qa": qa}
