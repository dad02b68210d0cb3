"""The checks a briefing passes before it is stored and used.

- budget: each variant within its token budget;
- sections: who they are, what matters today and how to meet them are all there;
- guardrails: nothing that could pass for instructions (a change of persona, rules or tools), so the
  briefing stays what the static persona says it is: quoted notes;
- quoted: nothing tag-like or fenced that could close its `<your_briefing>` fence or open another;
- speakable: the voice variant is plain short sentences, no Markdown, lists, links or symbols;
- threads: every open thread of the package is mentioned or listed as left out;
- kept: a briefing that shrinks to a fraction of the previous one is a collapse, not an edit.

A briefing that fails any check is not stored: the previous valid one stays, or turns use v1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.context.briefing.writer import BriefingDraft
from agent.core.settings import ContextSettings
from agent.core.tokens import TokenCounter

_INSTRUCTION_LIKE = re.compile(
    r"ignore (?:all |any |the |your )?(?:previous|prior|above|earlier)"
    r"|disregard (?:all |any |the |your )?(?:previous|prior|above|rules|instructions)"
    r"|you are (?:now|no longer)|from now on,? you|new (?:persona|rules|instructions)"
    r"|system (?:prompt|message)|\b(?:call|use|invoke|run) (?:the )?\w+ tool\b"
    r"|\b(?:conversation_search|conversation_get|memory_search|memory_add)\b",
    re.IGNORECASE,
)
_TAG_LIKE = re.compile(r"<[/!?A-Za-z]|`{3}|~{3}")
_HEADING = re.compile(r"^\s*(?:#|>|={3,}|-{3,})", re.MULTILINE)
_NOT_SPEAKABLE = re.compile(r"[#*_`|<>\[\]{}~]|https?://|^\s*(?:[-•]|\d+\.)\s", re.MULTILINE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"[^\W\d_]{4,}")
MAX_SPOKEN_WORDS = 30
# A thread counts as mentioned when this share of its words (4 letters or more) appears.
MENTION_SHARE = 0.5
# Shorter than this share of the previous briefing (when that was longer than COLLAPSE_MIN_TOKENS).
COLLAPSE_SHARE = 0.25
COLLAPSE_MIN_TOKENS = 120


@dataclass(frozen=True)
class Check:
    """One validator's verdict."""

    name: str
    ok: bool
    detail: str = ""


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def mentioned(thread: str, text: str) -> bool:
    """Whether most of the thread's words appear in `text` (any case, any order)."""
    wanted = _words(thread)
    if not wanted:
        return thread.casefold().strip() in text.casefold()
    return len(wanted & _words(text)) >= MENTION_SHARE * len(wanted)


def validate(
    draft: BriefingDraft,
    *,
    threads: list[str],
    previous_tokens: int | None,
    settings: ContextSettings,
    counter: TokenCounter,
) -> list[Check]:
    """Every check on one draft; the draft is usable only if all are ok."""
    text = draft.text()
    text_tokens, voice_tokens = counter.count(text), counter.count(draft.voice)
    checks: list[Check] = []
    over = []
    if text_tokens > settings.context_briefing_budget:
        over.append(f"text {text_tokens} > {settings.context_briefing_budget}")
    if voice_tokens > settings.context_briefing_voice_budget:
        over.append(f"voice {voice_tokens} > {settings.context_briefing_voice_budget}")
    checks.append(Check("budget", not over, "; ".join(over)))
    missing = [name for name in ("who", "today", "approach") if not getattr(draft, name).strip()]
    if not draft.voice.strip():
        missing.append("voice")
    checks.append(Check("sections", not missing, ", ".join(missing) and f"missing: {', '.join(missing)}"))
    everything = "\n".join([text, *draft.left_out, draft.voice])
    found = _INSTRUCTION_LIKE.search(everything)
    checks.append(
        Check("guardrails", found is None, f"instruction-like: {found.group(0)!r}" if found else "")
    )
    quoted = _TAG_LIKE.search(everything) or _HEADING.search(text)
    checks.append(Check("quoted", quoted is None, f"structure: {quoted.group(0)!r}" if quoted else ""))
    problems = []
    if (symbol := _NOT_SPEAKABLE.search(draft.voice)) is not None:
        problems.append(f"not speakable: {symbol.group(0).strip()!r}")
    long = [s for s in _SENTENCE.split(draft.voice.strip()) if len(s.split()) > MAX_SPOKEN_WORDS]
    if long:
        problems.append(f"{len(long)} sentences over {MAX_SPOKEN_WORDS} words")
    checks.append(Check("speakable", not problems, "; ".join(problems)))
    covered = "\n".join([text, *draft.left_out])
    unmentioned = [t for t in threads if not mentioned(t, covered)]
    checks.append(
        Check(
            "threads",
            not unmentioned,
            f"{len(unmentioned)} of {len(threads)} open threads unmentioned" if unmentioned else "",
        )
    )
    collapsed = (
        previous_tokens is not None
        and previous_tokens > COLLAPSE_MIN_TOKENS
        and text_tokens < COLLAPSE_SHARE * previous_tokens
    )
    checks.append(
        Check("kept", not collapsed, f"{previous_tokens} -> {text_tokens} tokens" if collapsed else "")
    )
    return checks
