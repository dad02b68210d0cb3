"""What of an error may leave the process: the one redacted description logs and traces both use.

A database error's text carries the statement's bound values (SQLAlchemy's `[parameters: ...]`
line), which can be a person's message; the description keeps the error's type, its message and
the statement, never the values.
"""

from __future__ import annotations

# Longest description a span's status carries (a statement can be long; its start says enough).
MAX_DESCRIPTION = 1000


def without_parameters(text: str) -> str:
    """The text with SQLAlchemy's `[parameters: ...]` lines hidden: they can hold message text."""
    return "\n".join(
        "[parameters hidden]" if line.lstrip().startswith("[parameters: ") else line
        for line in text.split("\n")
    )


def describe_error(exc: BaseException) -> str:
    """`Type: message` (or just the type when the message is empty), on one line, values hidden."""
    text = without_parameters(str(exc)).strip()
    name = type(exc).__name__
    return f"{name}: {' '.join(text.split())}" if text else name
