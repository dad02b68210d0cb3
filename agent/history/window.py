"""The part of a conversation's history a request is sent, cut in steps so that its bytes stay put.

A provider reads a prompt from its cache only up to the first byte that differs from the previous
request. Trimming a history to its budget one turn at a time would drop the oldest turn on every
request once the budget is reached, and every request would pay for the whole history again. So
the window is cut in steps: while it fits the budget it only grows; when a turn takes it over, the
notes of the turns before that one are dropped first (agent/history/turn_notes.py), then the oldest
whole turns, until the window is down to `keep` of the budget. The next cut comes only after
several more turns, and between cuts each request starts with the previous one's bytes.

The window is replayed from the start of the stored history on every turn, so it is the same in
every process and after a restart, with nothing stored beside the history.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic_ai.messages import BaseToolReturnPart, ModelMessage, ModelRequest, UserPromptPart

from agent.core.tokens import TokenCounter
from agent.history.turn_notes import without_notes

# A cut leaves the window at this share of the history budget.
KEEP = 0.6


@dataclass(frozen=True)
class Window:
    """The messages to send, where they start in the stored history, and how many cuts made them."""

    messages: list[ModelMessage]
    start: int
    cuts: int
    tokens: int


def turn_starts(messages: Sequence[ModelMessage]) -> list[int]:
    """Where a turn begins: a request with a user prompt that answers no tool call."""
    return [
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest)
        and any(isinstance(p, UserPromptPart) for p in m.parts)
        and not any(isinstance(p, BaseToolReturnPart) for p in m.parts)
    ]


def window(
    messages: Sequence[ModelMessage], *, budget: int, counter: TokenCounter, keep: float = KEEP
) -> Window:
    """The history to send: all of it while it fits `budget`, else what the replayed cuts left."""
    msgs = list(messages)
    starts = turn_starts(msgs)
    if not starts:
        return Window(msgs, 0, 0, counter.count_messages(msgs))
    bounds = [*starts[1:], len(msgs)]
    full = [counter.count_messages(msgs[a:b]) for a, b in zip(starts, bounds, strict=True)]
    bare_cache: dict[int, int] = {}

    def bare(turn: int) -> int:
        # A turn's tokens once its notes are dropped (counted only for turns a cut reaches).
        if turn not in bare_cache:
            span = msgs[starts[turn] : bounds[turn]]
            bare_cache[turn] = counter.count_messages([without_notes(m) for m in span])
        return bare_cache[turn]

    first, stripped, cuts = 0, 0, 0
    total = 0
    for turn, tokens in enumerate(full):
        total += tokens
        if total <= budget or turn == first:
            continue
        # A cut: the notes of every turn before this one go first, then the oldest turns.
        cuts += 1
        stripped = turn
        total = sum(bare(t) for t in range(first, turn)) + tokens
        while first < turn and total > budget * keep:
            total -= bare(first)
            first += 1
    head = starts[first]
    sent = [without_notes(m) if i < starts[stripped] else m for i, m in enumerate(msgs[head:], start=head)]
    return Window(sent, head, cuts, total)
