"""The context laid out in cache order: the conversation's package, the history, then this turn's note.

A chat request is read by the provider from its cache up to the first byte that differs from an
earlier request, in the order tools → system → messages. So the context is fitted in three layers,
each independent of the ones after it:

1. **The conversation's package** (profile, earlier today, yesterday, unfinished topics, last
   conversation, thoughts; or the v2 briefing): fitted to the tier budgets and to the total budget
   less the note's share (the total budget bounds the package and the note; the history has its own
   budget), so a growing history never cuts it, and its collectors read the
   sources at the conversation's start (agent/context/package.py), so it is the same text on every turn
   until a source really changes. It follows the persona in the instructions.
2. **The history**, cut in steps (agent/history/window.py).
3. **This turn's note**: the time and the facts found for this message, each to its budget. It
   goes first in the user prompt and stays with that turn (agent/history/turn_notes.py).

Over the hard cap (one huge message), the history's long texts are shortened first, then the
note's facts, then the package's tiers in the budget manager's cut order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from pydantic_ai.messages import ModelMessage

from agent.context.budget import CUT_ORDER, Budgets, Cut, Fitted, assemble, fit, shrink_block, squeeze_history
from agent.context.tiers import TierBlock
from agent.core.tokens import TokenCounter
from agent.history.messages import trim_history
from agent.history.turn_notes import note
from agent.history.window import Window, window

# The note's parts, in the order the model reads them.
NOTE_ORDER = ("time", "memory")
# Tokens the note's time line and tags take at most.
TIME_RESERVE = 80


@dataclass(frozen=True)
class Layered:
    """The three layers, and the whole as one `Fitted` (for the snapshot and other surfaces)."""

    fitted: Fitted
    package_text: str
    note: str
    window: Window


def fit_layers(
    fixed: Sequence[TierBlock],
    tiers: Mapping[str, TierBlock],
    turn: Sequence[TierBlock],
    history: Sequence[ModelMessage],
    *,
    budgets: Budgets,
    counter: TokenCounter,
) -> Layered:
    """Fit the package (`fixed` and `tiers`), the history and the turn's blocks; see the module doc."""
    # The total budget bounds the package and the note together; the note's share is reserved whole,
    # so that the package's fit does not depend on what this message found.
    reserve = budgets.tiers.get("memory", 0) + TIME_RESERVE
    package = fit(fixed, tiers, [], budgets=replace(budgets, total=budgets.total - reserve), counter=counter)
    blocks = dict(package.blocks)
    cuts = list(package.cuts)
    notes: dict[str, TierBlock] = {}
    for block in turn:
        limit = budgets.tiers.get(block.name)
        fitted = shrink_block(block, limit, counter) if limit is not None else block
        if fitted != block:
            cuts.append(Cut(block.name, len(block.items) - len(fitted.items), 0, "tier budget"))
        if fitted.items:
            notes[block.name] = fitted
    win = window(history, budget=budgets.history, counter=counter)
    # Only a window whose newest turn alone is over the budget still needs trimming.
    trim = trim_history(
        win.messages,
        budget=budgets.history,
        counter=counter,
        tool_output_max_tokens=budgets.tool_output_max,
        min_tokens=budgets.history_min,
    )
    messages, history_tokens = trim.messages, trim.tokens
    dropped = len(history) - len(messages)
    if dropped or trim.trimmed_tool_outputs:
        cuts.append(Cut("history", dropped, counter.count_messages(history) - history_tokens, "tier budget"))

    def note_text() -> str:
        return note([b.render() for name in NOTE_ORDER if (b := notes.get(name)) is not None])

    def total() -> int:
        return counter.count(assemble(blocks)) + counter.count(note_text()) + history_tokens

    over = total() - budgets.hard_cap
    if over > 0 and history_tokens > budgets.history_min:
        squeezed = squeeze_history(messages, max(history_tokens - over, budgets.history_min), counter)
        tokens = counter.count_messages(squeezed)
        cuts.append(Cut("history", 0, history_tokens - tokens, "hard cap"))
        messages, history_tokens = squeezed, tokens
    for name, layer in [("memory", notes), *((n, blocks) for n in (*CUT_ORDER, "profile"))]:
        over = total() - budgets.hard_cap
        if over <= 0:
            break
        current = layer.get(name)
        if current is None:
            continue
        size = counter.count(current.render())
        shrunk = shrink_block(current, max(size - over, 0), counter)
        cuts.append(Cut(name, len(current.items) - len(shrunk.items), size, "hard cap"))
        if shrunk.items:
            layer[name] = shrunk
        else:
            del layer[name]
    package_text, turn_note = assemble(blocks), note_text()
    every = {**blocks, **notes}
    whole = replace(
        package,
        text="\n\n".join(t for t in (package_text, turn_note) if t),
        blocks=every,
        block_tokens={name: counter.count(b.render()) for name, b in every.items()},
        history=messages,
        history_tokens=history_tokens,
        text_tokens=counter.count(package_text) + counter.count(turn_note),
        cuts=cuts,
        history_dropped_messages=dropped,
        history_trimmed_tool_outputs=trim.trimmed_tool_outputs,
    )
    return Layered(whole, package_text, turn_note, win)
