"""Questions across the conversations ("list the order in which I brought up …", "how did my
project progress?", "summarise how my resume developed"), and the spread of their best hits over
the person's days.

Such a question (an order, a progress) is answered by turns spread over the person's days, each
about another aspect; the candidates it draws crowd on the day that talked most of the subject.
Each next hit is the candidate whose score, × SEARCH_OVERVIEW_DAY_FACTOR once for each hit already
taken from its day, stays the highest. A question for a summary reads both speakers' turns: a
summary tells what was said on both sides, whoever the question speaks of. Pure functions over
what the search already holds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import date

# Words that ask for a summary of the conversations, in the languages the search serves; matched
# at the start of a word of the lower-cased query, in the person's language only ("resume" is a CV
# in English, "résumé" a summary in French).
_SUMMARY_WORDS = {
    "en": ("summar", "recap", "overview"),
    "fr": ("résum", "resum", "récapitul", "recapitul"),
    "es": ("resum", "recapitul"),
    "de": ("zusammenfass", "überblick"),
    "it": ("riassum", "riassunt", "riepilog"),
    "pt": ("resum", "recapitul"),
    "nl": ("samenvat", "overzicht"),
    "ru": ("кратко", "резюм", "подытож", "обзор"),
    "uk": ("підсум", "огляд"),
    "zh": ("总结", "概括", "回顾"),
    "ja": ("まとめ", "要約", "振り返"),
}
# Words that ask for what was said across the conversations rather than one turn of it (an order,
# a progress over time), besides a summary.
_ACROSS_WORDS = {
    "en": (
        "throughout",
        "over time",
        "over the past",
        "the order",
        "what order",
        "progress",
        "evolv",
        "timeline",
    ),
    "fr": ("au fil", "tout au long", "ordre", "progress", "évolu"),
    "es": ("a lo largo", "orden", "progres", "evolu"),
    "de": ("im laufe", "reihenfolge", "fortschritt", "entwickelt"),
    "it": ("nel corso", "ordine", "progress", "evolu"),
    "pt": ("ao longo", "ordem", "progress", "evolu"),
    "nl": ("in de loop", "volgorde", "voortgang"),
    "ru": ("на протяжении", "за всё время", "за все время", "порядк", "прогресс"),
    "uk": ("протягом", "порядк", "прогрес"),
    "zh": ("顺序", "进展", "一直以来"),
    "ja": ("順番", "順序", "進捗"),
}


# "Across" spans anything ("consistent across all comparisons"): it asks across the conversations
# only when one of their words follows within a few words ("across my sessions").
_ACROSS_THE_CONVERSATIONS = {
    "en": (
        "across",
        ("conversation", "session", "chat", "discussion", "request", "question", "message", "talk"),
    ),
    "fr": (
        "à travers",
        ("conversation", "séance", "session", "discussion", "échange", "message", "question"),
    ),
    "es": ("a través", ("conversacion", "conversación", "sesion", "sesión", "charla", "mensaje", "pregunta")),
}


def _pattern(language: str, words: tuple[str, ...], *, spans: bool = False) -> re.Pattern[str]:
    # Chinese and Japanese have no spaces between words: their words match anywhere.
    bound = "" if language in ("zh", "ja") else r"(?<![^\W_])"
    alternatives = [bound + re.escape(word) for word in words]
    if spans and language in _ACROSS_THE_CONVERSATIONS:
        across, nouns = _ACROSS_THE_CONVERSATIONS[language]
        alternatives.append(rf"{bound}{re.escape(across)}\s(?:\S+\s){{0,3}}?(?:{'|'.join(nouns)})")
    return re.compile("|".join(alternatives))


_SUMMARY = {language: _pattern(language, words) for language, words in _SUMMARY_WORDS.items()}
_ACROSS = {language: _pattern(language, words, spans=True) for language, words in _ACROSS_WORDS.items()}


def is_summary(query: str, language: str | None) -> bool:
    """Whether the query asks for a summary of the conversations, read in the person's language
    (`users.language`; English when unknown or not listed above)."""
    pattern = _SUMMARY.get(language or "en", _SUMMARY["en"])
    return pattern.search(" ".join(query.lower().split())) is not None


def is_overview(query: str, language: str | None) -> bool:
    """Whether the query asks about what was said across the conversations, an order or a progress
    over time, other than a summary (in the person's language, as `is_summary`)."""
    pattern = _ACROSS.get(language or "en", _ACROSS["en"])
    found = pattern.search(" ".join(query.lower().split())) is not None
    return found and not is_summary(query, language)


def spread_over_days(
    ranked: Sequence[int], scores: Mapping[int, float], days: Mapping[int, date], factor: float
) -> dict[int, float]:
    """The candidates' scores after taking them greedily, each × `factor` once for each candidate
    taken before it from its day; each is its score when it was taken, so the scores fall in the
    order taken."""
    left = list(ranked)
    per_day: dict[date, int] = {}
    out: dict[int, float] = {}

    def value(message_id: int) -> float:
        day = days.get(message_id)
        return scores[message_id] * factor ** per_day.get(day, 0) if day is not None else scores[message_id]

    while left:
        best = max(left, key=lambda i: (value(i), i))
        out[best] = value(best)
        left.remove(best)
        day = days.get(best)
        if day is not None:
            per_day[day] = per_day.get(day, 0) + 1
    return out
