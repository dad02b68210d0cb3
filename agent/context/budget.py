"""The token budget manager: fits the tiers and the history into the total budget and the hard cap.

1. Each tier is fitted to its own budget (items dropped from the end, the last one shortened).
2. History is trimmed to its budget (`agent.history.messages.trim_history`: tool outputs first, then the
   oldest turns, never splitting a tool call from its return).
3. Over the total budget, cut in `CUT_ORDER`: the persona's thoughts, last conversation, threads,
   memory, yesterday, today, then history oldest first, never below `history_min` tokens.
4. Over the hard cap still (one huge message, a huge profile), shorten the history's long texts
   down to `history_min`, then the fixed parts. The result never exceeds the hard cap.
Pure and deterministic: the same inputs give the same output.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from pydantic_ai.messages import ModelMessage, ModelRequest, TextPart, UserPromptPart

from agent.context.tiers import TierBlock, TierName
from agent.core.settings import ContextSettings
from agent.core.tokens import TokenCounter
from agent.history.messages import trim_history
from agent.history.turn_notes import is_note

CUT_ORDER: tuple[TierName, ...] = ("thoughts", "last_conversation", "threads", "memory", "yesterday", "today")
# Display order of the instructions text.
DISPLAY_ORDER: tuple[TierName, ...] = (
    "briefing",
    "time",
    "profile",
    "today",
    "yesterday",
    "threads",
    "last_conversation",
    "memory",
    "thoughts",
)
SEPARATOR = "\n\n"
ELLIPSIS = " …"
# Below this an item is dropped rather than shortened to a stub.
MIN_PARTIAL_TOKENS = 12
_P = TypeVar("_P")
Reason = Literal["tier budget", "total budget", "hard cap"]


@dataclass(frozen=True)
class Budgets:
    """Every number the budget manager uses (from settings)."""

    total: int = 4100
    hard_cap: int = 6150
    history: int = 3000
    history_min: int = 100
    tool_output_max: int = 300
    tiers: Mapping[str, int] = field(
        default_factory=lambda: {
            "today": 500,
            "yesterday": 300,
            "threads": 400,
            "last_conversation": 300,
            "memory": 600,
            "profile": 700,
            "thoughts": 150,
        }
    )

    @classmethod
    def from_settings(cls, settings: ContextSettings) -> Budgets:
        """The budgets configured in settings."""
        return cls(
            total=settings.context_total_budget,
            hard_cap=settings.context_hard_cap,
            history=settings.history_token_budget,
            history_min=settings.history_min_tokens,
            tool_output_max=settings.tool_output_max_tokens,
            tiers={
                "today": settings.context_today_budget,
                "yesterday": settings.context_yesterday_budget,
                "threads": settings.context_threads_budget,
                "last_conversation": settings.context_last_conversation_budget,
                "memory": settings.context_facts_budget,
                "profile": settings.profile_tokens,
                "thoughts": settings.context_thoughts_budget,
            },
        )


@dataclass(frozen=True)
class Cut:
    """Something left out: which tier, how many items and tokens, and why."""

    tier: str
    items: int
    tokens: int
    reason: Reason


@dataclass(frozen=True)
class Fitted:
    """The assembled context: instructions text, history, and what was cut."""

    text: str
    blocks: dict[str, TierBlock]
    block_tokens: dict[str, int]
    history: list[ModelMessage]
    history_tokens: int
    text_tokens: int
    cuts: list[Cut]
    history_dropped_messages: int
    history_trimmed_tool_outputs: int

    @property
    def total_tokens(self) -> int:
        """Instructions text plus history."""
        return self.text_tokens + self.history_tokens


def truncate_text(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """`text` shortened to at most `max_tokens` tokens, marked with an ellipsis."""
    if counter.count(text) <= max_tokens:
        return text
    keep = max(max_tokens - counter.count(ELLIPSIS), 0)
    tokens = counter.encode(text)
    while keep > 0:
        candidate = counter.decode(tokens[:keep]).rstrip() + ELLIPSIS
        if counter.count(candidate) <= max_tokens:
            return candidate
        keep -= 1
    return ""


def shrink_block(block: TierBlock, max_tokens: int, counter: TokenCounter) -> TierBlock:
    """The longest prefix of the block's items that fits, the next item shortened if worth it."""
    if counter.count(block.render()) <= max_tokens:
        return block
    # Counting item by item (cached per string) keeps this linear; the join is verified below.
    kept: list[str] = []
    used = counter.count(block.heading)
    for item in block.items:
        cost = counter.count(item) + 1
        if used + cost <= max_tokens:
            kept.append(item)
            used += cost
            continue
        room = max_tokens - used - 1
        if room >= MIN_PARTIAL_TOKENS:
            short = truncate_text(item, room, counter)
            if short:
                kept.append(short)
        break
    # The joined text can tokenise differently from its pieces: verify, never assume.
    while kept and counter.count(block.with_items(tuple(kept)).render()) > max_tokens:
        kept.pop()
    return block.with_items(tuple(kept))


def assemble(blocks: Mapping[str, TierBlock]) -> str:
    """The instructions text: the blocks in display order, empty ones left out."""
    return SEPARATOR.join(
        text for name in DISPLAY_ORDER if (b := blocks.get(name)) is not None and (text := b.render())
    )


def fit(
    fixed: Sequence[TierBlock],
    tiers: Mapping[str, TierBlock],
    history: Sequence[ModelMessage],
    *,
    budgets: Budgets,
    counter: TokenCounter,
) -> Fitted:
    """Fit fixed parts (time, profile), tiers and history into the budgets; see the module doc."""
    cuts: list[Cut] = []
    blocks: dict[str, TierBlock] = {}

    def tokens_of(block: TierBlock) -> int:
        return counter.count(block.render())

    def record(name: str, before: TierBlock, after: TierBlock, reason: Reason) -> None:
        # Items removed or shortened.
        changed = sum(
            1 for i, item in enumerate(before.items) if i >= len(after.items) or after.items[i] != item
        )
        cuts.append(Cut(name, changed, tokens_of(before) - tokens_of(after), reason))

    for block in [*fixed, *tiers.values()]:
        limit = budgets.tiers.get(block.name)
        fitted = shrink_block(block, limit, counter) if limit is not None else block
        if fitted != block:
            record(block.name, block, fitted, "tier budget")
        if fitted.items:
            blocks[block.name] = fitted

    trim = trim_history(
        history,
        budget=budgets.history,
        counter=counter,
        tool_output_max_tokens=budgets.tool_output_max,
        min_tokens=budgets.history_min,
    )
    messages, history_tokens = trim.messages, trim.tokens
    dropped, trimmed_tools = trim.dropped_messages, trim.trimmed_tool_outputs
    if trim.dropped_messages or trim.trimmed_tool_outputs:
        cuts.append(Cut("history", trim.dropped_messages, trim.original_tokens - trim.tokens, "tier budget"))

    def text_tokens() -> int:
        return counter.count(assemble(blocks))

    # Total budget: cut the lower tiers first, item by item from each tier's end.
    for name in CUT_ORDER:
        over = text_tokens() + history_tokens - budgets.total
        if over <= 0:
            break
        current = blocks.get(name)
        if current is None:
            continue
        shrunk = shrink_block(current, max(tokens_of(current) - over, 0), counter)
        record(name, current, shrunk, "total budget")
        if shrunk.items:
            blocks[name] = shrunk
        else:
            del blocks[name]
    over = text_tokens() + history_tokens - budgets.total
    if over > 0 and history_tokens > budgets.history_min:
        again = trim_history(
            messages,
            budget=max(history_tokens - over, budgets.history_min),
            counter=counter,
            tool_output_max_tokens=budgets.tool_output_max,
            min_tokens=budgets.history_min,
        )
        if again.tokens < history_tokens:
            cuts.append(Cut("history", again.dropped_messages, history_tokens - again.tokens, "total budget"))
            dropped += again.dropped_messages
            trimmed_tools += again.trimmed_tool_outputs
            messages, history_tokens = again.messages, again.tokens

    # Hard cap: shorten what is left, history's long texts first, then the fixed parts.
    over = text_tokens() + history_tokens - budgets.hard_cap
    if over > 0 and history_tokens > budgets.history_min:
        target = max(history_tokens - over, budgets.history_min)
        squeezed = squeeze_history(messages, target, counter)
        new_tokens = counter.count_messages(squeezed)
        cuts.append(Cut("history", 0, history_tokens - new_tokens, "hard cap"))
        messages, history_tokens = squeezed, new_tokens
    for name in (*CUT_ORDER, "profile", "time"):
        over = text_tokens() + history_tokens - budgets.hard_cap
        if over <= 0:
            break
        current = blocks.get(name)
        if current is None:
            continue
        shrunk = shrink_block(current, max(tokens_of(current) - over, 0), counter)
        record(name, current, shrunk, "hard cap")
        if shrunk.items:
            blocks[name] = shrunk
        else:
            del blocks[name]
    text = assemble(blocks)
    return Fitted(
        text=text,
        blocks=blocks,
        block_tokens={name: tokens_of(b) for name, b in blocks.items()},
        history=messages,
        history_tokens=history_tokens,
        text_tokens=counter.count(text),
        cuts=cuts,
        history_dropped_messages=dropped,
        history_trimmed_tool_outputs=trimmed_tools,
    )


def squeeze_history(
    messages: Sequence[ModelMessage], target: int, counter: TokenCounter
) -> list[ModelMessage]:
    """Shorten every text part longer than a common cap until the history fits `target` tokens.

    Only what trimming could not do: the newest turn alone is over the hard cap. Tool calls and
    returns are left whole (their pairing and shape must survive); a binary search finds the cap.
    """
    msgs = list(messages)
    if counter.count_messages(msgs) <= target:
        return msgs

    def short(part: _P, cap: int) -> _P:
        if isinstance(part, (TextPart, UserPromptPart)) and isinstance(part.content, str):
            if counter.count(part.content) > cap:
                return dataclasses.replace(part, content=truncate_text(part.content, cap, counter))
        elif isinstance(part, UserPromptPart) and not isinstance(part.content, str):
            # A prompt with its turn's note: the texts are shortened, the note and any file kept.
            items = [
                truncate_text(item, cap, counter)
                if isinstance(item, str) and not is_note(item) and counter.count(item) > cap
                else item
                for item in part.content
            ]
            if items != list(part.content):
                return dataclasses.replace(part, content=items)
        return part

    def capped(cap: int) -> list[ModelMessage]:
        out: list[ModelMessage] = []
        for m in msgs:
            if isinstance(m, ModelRequest):
                out.append(dataclasses.replace(m, parts=[short(p, cap) for p in m.parts]))
            else:
                out.append(dataclasses.replace(m, parts=[short(p, cap) for p in m.parts]))
        return out

    low, high = 0, target
    best = capped(0)
    while low <= high:
        mid = (low + high) // 2
        trial = capped(mid)
        if counter.count_messages(trial) <= target:
            best, low = trial, mid + 1
        else:
            high = mid - 1
    return best
