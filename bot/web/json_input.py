"""JSON that comes from outside (webhook updates, voice bodies), parsed within a fixed nesting depth.

Python's `json` module recurses once per level: a body nested 100,000 deep raises RecursionError
(a 500), and one nested a few hundred deep parses but then overflows whatever walks it next (PTB's
`Update.de_json`, our own validators). No request we serve needs more than a handful of levels, so
the depth is checked before parsing, in one linear pass that skips string contents.

JSON's `"\ud800"` escape parses to half of a surrogate pair, which Python holds but no database
(nor UTF-8) can store; such halves become U+FFFD, so the rest of the text is kept and stored.
"""

from __future__ import annotations

import json
import re
from typing import Any

from bot.errors import JsonInputError

# Telegram's deepest update (a reply to a message with a keyboard, inside a callback query) is
# about a dozen levels; voice bodies are three.
MAX_DEPTH = 64

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT = "\ufffd"

# A JSON string with its escapes, or one bracket: strings are matched first, so a bracket inside
# a string is never counted.
_TOKENS = re.compile(rb'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


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
    """Parse `body` as JSON, refusing it (JsonInputError) when it nests past `max_depth`.

    Lone surrogates in its strings (and keys) come back as U+FFFD.
    """
    raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
    if nesting_depth(raw) > max_depth:
        raise JsonInputError(f"JSON nested deeper than {max_depth} levels")
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise JsonInputError(f"not JSON: {exc}") from exc
    # A surrogate arrives as a \u escape, or as raw bytes json decodes with "surrogatepass".
    if b"\\u" in raw or b"\xed" in raw:
        value = without_lone_surrogates(value)
    return value


def without_lone_surrogates(value: Any) -> Any:
    """`value` with every half of a surrogate pair in its strings replaced by U+FFFD."""
    if isinstance(value, str):
        # A proper pair is one character once parsed, so whatever matches here stands alone.
        return _LONE_SURROGATE.sub(REPLACEMENT, value)
    if isinstance(value, dict):
        return {without_lone_surrogates(k): without_lone_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_lone_surrogates(item) for item in value]
    return value
