"""Passages of long messages: the units a long answer is searched by, on both sides of the search.

An assistant's answer often runs to thousands of characters, and a question is about one part of
it. Whole, such a message is embedded only as far as the model reads (MiniLM: 256 word pieces)
and scored lexically against its whole length. So a message over the budget is cut into
consecutive passages (at blank lines, then lines, then sentences, then words), each still naming
its message: the vector index embeds each passage as a section of its own (agent/search/chunks.py)
and full text scores a long message by its best passage (`passage_scores`). A hit is still the
message; `conversation_get(message_id)` opens all of it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache

import snowballstemmer
from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncSession

from agent.search.language import SNOWBALL, Term
from db.search_text import DEFAULT_LANGUAGE, fold

# A message over this many words is scored by its best passage of at most as many.
PASSAGE_WORDS = 100
_WORD = re.compile(r"[^\W_]+")
# Where a text may be cut, coarsest first: blank lines, line ends, sentence ends, spaces.
_CUTS = (re.compile(r"\n\s*\n"), re.compile(r"\n"), re.compile(r"(?<=[.!?;:])\s+"), re.compile(r"\s+"))


def word_count(text: str) -> int:
    """Words as full text counts them (runs of letters and digits)."""
    return len(_WORD.findall(text))


def _pieces(
    text: str, start: int, end: int, budget: int, count: Callable[[str], int], level: int
) -> list[tuple[int, int]]:
    """Spans of text[start:end] at most `budget` long, cut at the coarsest boundaries that do."""
    if count(text[start:end]) <= budget or level >= len(_CUTS):
        return [(start, end)]
    spans: list[tuple[int, int]] = []
    at = start
    for cut in _CUTS[level].finditer(text, start, end):
        if cut.start() > at:
            spans.append((at, cut.start()))
        at = cut.end()
    if at < end:
        spans.append((at, end))
    if len(spans) <= 1:
        return _pieces(text, start, end, budget, count, level + 1)
    out: list[tuple[int, int]] = []
    for a, b in spans:
        out += _pieces(text, a, b, budget, count, level + 1) if count(text[a:b]) > budget else [(a, b)]
    return out


def passage_spans(text: str, budget: int, count: Callable[[str], int]) -> list[tuple[int, int]]:
    """Consecutive spans of `text`, each at most `budget` by `count` where its cuts allow (a text
    within the budget is one span): pieces cut at the coarsest boundaries, packed greedily."""
    if count(text) <= budget:
        return [(0, len(text))]
    spans: list[tuple[int, int]] = []
    first, last, size = -1, -1, 0
    for a, b in _pieces(text, 0, len(text), budget, count, 0):
        piece = count(text[a:b])
        if first >= 0 and size + piece > budget:
            spans.append((first, last))
            first, size = -1, 0
        if first < 0:
            first = a
        last, size = b, size + piece
    if first >= 0:
        spans.append((first, last))
    return spans


@cache
def _stemmer(language: str) -> snowballstemmer.Stemmer | None:
    algorithm = "english" if language == "en" else SNOWBALL.get(language)
    return snowballstemmer.stemmer(algorithm) if algorithm else None


class TermMatcher:
    """Where a query's full-text terms occur in a message's text, read the way full text reads
    them: folded, the language's stem (a prefix for terms already stemmed), CJK pairs adjacent."""

    def __init__(self, terms: Sequence[Term], language: str | None) -> None:
        self.terms = list(terms)
        self.stemmer = _stemmer(language or DEFAULT_LANGUAGE)
        self._stems: dict[str, str] = {}

    def _stem(self, word: str) -> str:
        stem = self._stems.get(word)
        if stem is None:
            stem = self.stemmer.stemWord(word) if self.stemmer is not None else word
            self._stems[word] = stem
        return stem

    def positions(self, text: str) -> list[list[int]]:
        """For each term, the character positions in `text` where it occurs."""
        folded = fold(text).lower()
        found: list[list[int]] = []
        for term in self.terms:
            token = "".join(term.tokens)
            if len(term.tokens) > 1:
                found.append([m.start() for m in re.finditer(re.escape(token), folded)])
                continue
            if term.prefix:
                found.append([m.start() for m in re.finditer(r"\b" + re.escape(token), folded)])
                continue
            wanted = self._stem(token)
            head = re.escape(wanted[: max(1, min(len(wanted), len(token)) - 1)])
            found.append(
                [m.start() for m in re.finditer(rf"\b{head}\w*", folded) if self._stem(m.group(0)) == wanted]
            )
        return found


def passage_scores(
    texts: Mapping[int, str],
    matcher: TermMatcher,
    idf: Sequence[float],
    *,
    budget: int,
    size: Callable[[str], float],
) -> dict[int, list[tuple[float, float]]]:
    """For each message, its passages that hold a query term: (sum of the IDFs of the terms each
    holds, its size by `size`). A message none of whose passages holds a term is left out (the
    caller keeps its whole-message score), and so is one that cannot be cut."""
    out: dict[int, list[tuple[float, float]]] = {}
    for message_id, content in texts.items():
        spans = passage_spans(content, budget, word_count)
        if len(spans) < 2:
            continue  # nowhere to cut it (a text without spaces): it is scored whole
        where = matcher.positions(content)
        held: list[tuple[float, float]] = []
        for a, b in spans:
            weight = sum(w for w, places in zip(idf, where, strict=True) if any(a <= p < b for p in places))
            if weight > 0:
                held.append((weight, size(content[a:b])))
        if held:
            out[message_id] = held
    return out


async def by_passages(
    session: AsyncSession,
    user_id: int,
    scores: dict[int, float],
    found: dict[int, float],
    wanted: list[int],
    *,
    matcher: TermMatcher,
    idf: list[float],
    factor: Callable[[float], float],
    size: Callable[[str], float],
) -> None:
    """Score the long messages `wanted` (their sum of IDFs in `found`) by their best passage, in
    `scores`: a long answer competes by the part of it that matches, at that part's length."""
    if not wanted:
        return
    rows = await session.execute(
        text("SELECT id, user_id, content FROM transcript_messages WHERE id IN :ids").bindparams(
            bindparam("ids", expanding=True)
        ),
        {"ids": wanted},
    )
    texts = {int(i): str(content) for i, owner, content in rows if int(owner) == user_id and int(i) in found}
    held = passage_scores(texts, matcher, idf, budget=PASSAGE_WORDS, size=size)
    for message_id, passages in held.items():
        scores[message_id] = max(weight * factor(length) for weight, length in passages)
