"""JSON that comes from outside (webhook updates, voice bodies), parsed within a fixed nesting depth.

Python's `json` module recurses once per level: a body nested 100,000 deep raises RecursionError
(a 500), and one nested a few hundred deep parses but then overflows whatever walks it next (PTB's
`Update.de_json`, our own validators). No request we serve needs more than a handful of levels, so
the depth is checked before parsing, in one linear pass that skips string contents.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agent.core.errors import NikitaError

# Telegram's deepest update (a reply to a message with a keyboard, inside a callback query) is
# about a dozen levels; voice bodies are three.
MAX_DEPTH = 64

# A JSON string with its escapes, or one bracket: strings are matched first, so a bracket inside
# a string is never counted.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


class JsonInputError(NikitaError, ValueError):
    """A body that is not JSON, or is JSON nested deeper than `MAX_DEPTH`: the client's fault (400)."""


def nesting_depth(body: bytes) -> int:
    """The deepest nesting of arrays and objects in `body` (0 for a scalar)."""
    depth = deepest = 0
    for match in _TOKENS.finditer(body):
        token = match.group()
        if token in (b"[", b"{"):
            depth += 1
            deepest = max(deepest, depth)
        elif token in (b"]", b"}"):
            depth -= 1
    return deepest


def loads(body: bytes | str, *, max_depth: int = MAX_DEPTH) -> Any:
    """Parse `body` as JSON, refusing it (JsonInputError) when it nests past `max_depth`."""
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if nesting_depth(raw) > max_depth:
        raise JsonInputError(f"JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise JsonInputError(f"not JSON: {exc}") from exc
