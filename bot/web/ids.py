"""Ids that come from outside (paths, JSON bodies): ASCII digits, within the signed 64 bits both
databases store.

`str.isdigit()` is true for "²" and "١٢", which `int()` then refuses or reads as another number;
`int()` refuses strings past 4,300 digits; and a number past 64 bits fails in the database driver
(OverflowError on SQLite, an error from PostgreSQL). So an id is read here, once, before any
database call: a malformed one is the client's fault (400), one out of range names nothing (404).
"""

from __future__ import annotations

import re

from bot.errors import IdFormatError

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# `[0-9]` is ASCII whatever the flags; `\d` would take any Unicode digit.
_UNSIGNED = re.compile(r"[0-9]+")
_SIGNED = re.compile(r"-?[0-9]+")
_MAX_DIGITS = len(str(INT64_MAX))


def parse_id(value: object, *, signed: bool = False) -> int | None:
    """The integer `value` names (an int, or ASCII digits with a minus when `signed`); None when it
    is outside signed 64 bits, so it names nothing stored; IdFormatError when it is no number."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise IdFormatError("an id is an integer")
    if isinstance(value, str):
        if not (_SIGNED if signed else _UNSIGNED).fullmatch(value):
            raise IdFormatError("an id is written in digits 0-9")
        digits = value.lstrip("-").lstrip("0") or "0"
        if len(digits) > _MAX_DIGITS:
            return None
        value = -int(digits) if value.startswith("-") else int(digits)
    if value < 0 and not signed:
        raise IdFormatError("an id is not negative")
    return value if INT64_MIN <= value <= INT64_MAX else None
