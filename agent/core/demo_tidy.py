"""The offline demo model's consolidation answer: the simple cases, decided by rules.

It reads the facts as the consolidation prompt lists them (`[id 12; said 2026-03-01, once; no
section] The user lives in Lisbon.`, in the order they were last said) and answers as a model
would, for where someone lives and where or as what they work: the same subject with the same
predicate and a new place replaces the older fact ("lives in Lisbon", later "moved to Porto"), the
same place twice is one fact, and such facts shown without a section go to `identity`.
Everything else it leaves as it is.
"""

from __future__ import annotations

import re
from typing import Any

_FACT = re.compile(r"^\[id (\d+); said [^;\]]+; ([^;\]]+)[^\]]*\] (.*)$", re.MULTILINE)
# (subject, predicate, value): where someone lives, and where or as what they work.
_RULES = (
    (
        "lives",
        re.compile(
            r"^(.+?) (?:lives?|is living|(?:has )?moved(?: back)?|(?:has )?relocated|is based)"
            r" (?:in|to) (.+?)[.!]?$",
            re.IGNORECASE,
        ),
    ),
    ("works at", re.compile(r"^(.+?) (?:works?|is working) (?:at|for) (.+?)[.!]?$", re.IGNORECASE)),
    ("works as", re.compile(r"^(.+?) (?:works?|is working) as (.+?)[.!]?$", re.IGNORECASE)),
)


def _normal(text: str) -> str:
    return " ".join(text.lower().split()).removeprefix("the ").removeprefix("a ").removeprefix("an ")


def claim(text: str) -> tuple[tuple[str, str], str] | None:
    """A fact's (subject, predicate) and value, for where someone lives or works; None otherwise."""
    for predicate, pattern in _RULES:
        found = pattern.match(text)
        if found is not None:
            return (_normal(found.group(1)), predicate), _normal(found.group(2))
    return None


def tidy(prompt: str) -> dict[str, Any]:
    """The consolidation answer for the facts in the prompt."""
    same: dict[int, list[int]] = {}
    replaced: list[dict[str, int]] = []
    sections: list[dict[str, Any]] = []
    # (subject, predicate) -> the latest fact's id and value, in the order the facts were said.
    latest: dict[tuple[str, str], tuple[int, str]] = {}
    for match in _FACT.finditer(prompt):
        fact_id, section, text = int(match.group(1)), match.group(2).strip(), match.group(3).strip()
        if (claimed := claim(text)) is None:
            continue
        key, value = claimed
        if key in latest:
            earlier, earlier_value = latest[key]
            if earlier_value == value:
                same.setdefault(earlier, [earlier]).append(fact_id)
                continue
            replaced.append({"older": earlier, "newer": fact_id})
        latest[key] = (fact_id, value)
        if section == "no section":
            sections.append({"id": fact_id, "section": "identity"})
    return {
        "same": [{"ids": ids, "keep": ids[0]} for ids in same.values()],
        "replaced": replaced,
        "sections": sections,
    }
