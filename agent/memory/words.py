"""The words a fact is matched by, in the person's language, and the lexical score of a query.

English facts are lower-cased words with a light suffix strip; other languages' are accent-folded
and stemmed with the language's Snowball stemmer, the way the transcript's full text reads them;
Chinese and Japanese runs become pairs of neighbouring characters (no spaces to split at). A
query's words score the facts holding them by the sum of their IDFs over the person's facts, the
transcript's weighting.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from agent.search.fts import query_terms
from agent.search.language import lexical_terms

# The share of one text's words another must hold (either way round) to say the same thing.
SAME_SHARE = 0.75


def stem(word: str) -> str:
    """A crude English suffix strip, enough to match "hiking" with "hike" among a person's facts."""
    for suffix in ("ing", "ies", "es", "ed", "s"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def fact_words(text: str, language: str | None) -> set[str]:
    """The words a fact (or a query) is matched by, in the person's language."""
    words = query_terms(text)
    if language in (None, "en"):
        return {stem(w) for w in words}
    return {"".join(term.tokens) for term in lexical_terms(words, language, stem=True)}


def similarity(sentence: str, fact: str, language: str | None = None) -> float:
    """The share of the sentence's words the fact holds ("lives in Lisbon" names "Ana lives in Lisbon")."""
    wanted = fact_words(sentence, language)
    return len(wanted & fact_words(fact, language)) / len(wanted) if wanted else 0.0


class Postings:
    """Word -> the positions of the facts holding it, over one list of fact texts."""

    def __init__(self, texts: Sequence[str], language: str | None) -> None:
        self.language = language
        self.size = len(texts)
        self.words: dict[str, list[int]] = {}
        self.sizes: list[int] = []
        for position, text in enumerate(texts):
            words = fact_words(text, language)
            self.sizes.append(len(words))
            for word in words:
                self.words.setdefault(word, []).append(position)

    def scores(self, query: str) -> dict[int, float]:
        """Each fact's lexical score for the query: the sum of the IDFs of the query words it holds."""
        terms = fact_words(query, self.language)
        totals: dict[int, float] = {}
        if not terms or not self.size:
            return totals
        for term in terms:
            holding = self.words.get(term, [])
            idf = math.log(1 + (self.size - len(holding) + 0.5) / (len(holding) + 0.5))
            for position in holding:
                totals[position] = totals.get(position, 0.0) + idf
        return totals
