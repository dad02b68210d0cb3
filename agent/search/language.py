"""The language a user writes in, and what full-text search does with it.

A user's language (`users.language`, an ISO 639-1 code) is detected from their first messages
that say it clearly (`detect_language`: the script, then stop words and letters for Latin
script) or set with `/language`. It chooses:

- on PostgreSQL, the text-search configuration each of the user's rows is indexed under
  (db/search_text.py: `french`, `russian`, ... and `simple` for languages PostgreSQL has no
  stemmer for); changing it re-indexes the user's rows in the same transaction (`set_language`),
  so nothing stored is lost to search;
- on SQLite, how query words are matched: the index holds unstemmed words for every language
  but English (FTS5's porter stems English only), so a word of another language is stemmed by
  that language's Snowball stemmer (the algorithms PostgreSQL uses) and matched as a prefix:
  "кошку" finds "кошка", "canciones" finds "canción".

Both databases fold accents (a French word typed without them matches) and index Chinese and
Japanese characters one by one; a run of them in a query becomes its overlapping character
pairs, each matched as adjacent characters, since those scripts put no spaces between words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import snowballstemmer
from sqlalchemy import text, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import User
from db.search_text import CJK, DEFAULT_LANGUAGE, fold

# ISO 639-1 code -> Snowball algorithm, for SQLite's query-side stemming.
SNOWBALL: dict[str, str] = {
    "ar": "arabic",
    "ca": "catalan",
    "cs": "czech",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "es": "spanish",
    "eu": "basque",
    "fa": "persian",
    "fi": "finnish",
    "fr": "french",
    "hi": "hindi",
    "hu": "hungarian",
    "hy": "armenian",
    "id": "indonesian",
    "it": "italian",
    "lt": "lithuanian",
    "nl": "dutch",
    "no": "norwegian",
    "pl": "polish",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sr": "serbian",
    "sv": "swedish",
    "ta": "tamil",
    "tr": "turkish",
}
# Languages /language accepts by name (English and the language's own), besides any two-letter code.
LANGUAGE_NAMES: dict[str, tuple[str, ...]] = {
    "ar": ("arabic", "العربية"),
    "de": ("german", "deutsch"),
    "en": ("english",),
    "es": ("spanish", "español"),
    "fa": ("persian", "farsi", "فارسی"),
    "fr": ("french", "français"),
    "it": ("italian", "italiano"),
    "ja": ("japanese", "日本語"),
    "ko": ("korean", "한국어"),
    "nl": ("dutch", "nederlands"),
    "pl": ("polish", "polski"),
    "pt": ("portuguese", "português"),
    "ru": ("russian", "русский"),
    "tr": ("turkish", "türkçe"),
    "uk": ("ukrainian", "українська"),
    "zh": ("chinese", "中文"),
}
# A stem shorter than this is matched whole: a two-letter prefix matches too much.
MIN_PREFIX = 3


@dataclass(frozen=True)
class Term:
    """One query term: a word, or a pair of CJK characters that must be adjacent."""

    tokens: tuple[str, ...]
    prefix: bool = False


@cache
def _stemmer(language: str) -> snowballstemmer.Stemmer | None:
    algorithm = SNOWBALL.get(language)
    return snowballstemmer.stemmer(algorithm) if algorithm else None


def lexical_terms(words: list[str], language: str | None, *, stem: bool) -> list[Term]:
    """A query's words as terms: folded (stemmed to a prefix when `stem` and the language has a
    stemmer other than English's), CJK runs as adjacent character pairs."""
    stemmer = _stemmer(language or DEFAULT_LANGUAGE) if stem else None
    out: list[Term] = []
    for word in (fold(w) for w in words):
        for part in re.split(f"({CJK.pattern}+)", word):
            if not part:
                continue
            if CJK.match(part):
                pairs = [tuple(part[i : i + 2]) for i in range(len(part) - 1)] or [(part,)]
                out.extend(Term(p) for p in pairs)
            elif stemmer is not None:
                stemmed = stemmer.stemWord(part)
                out.append(Term((stemmed,), prefix=True) if len(stemmed) >= MIN_PREFIX else Term((part,)))
            else:
                out.append(Term((part,)))
    return list(dict.fromkeys(out))


# Letters and short words that mark a Latin-script language (lower case, accents kept).
_LATIN_WORDS: dict[str, frozenset[str]] = {
    "en": frozenset("the and is are was you i my it of to in that this what with have for not".split()),
    "fr": frozenset("le la les des est et je tu un une que qui pas pour avec dans mon ma ce".split()),
    "es": frozenset("el la los las es y yo tu un una que no por para con mi muy pero como".split()),
    "de": frozenset("der die das und ist ich du nicht ein eine mit zu mein auf wie aber".split()),
    "it": frozenset("il lo la gli le è e io tu non un una che per con mio sono ma".split()),
    "pt": frozenset("o a os as é e eu você não um uma que para com meu muito mas".split()),
    "nl": frozenset("de het een en is ik je niet van dat met mijn voor maar".split()),
    "tr": frozenset("ve bir bu ben sen çok ne için ama var yok da de".split()),
    "id": frozenset("dan yang di ini itu saya aku tidak ada untuk dengan kamu".split()),
}
# Each of those words and the languages it marks.
_LANGUAGES_OF: dict[str, tuple[str, ...]] = {
    word: tuple(code for code, marks in _LATIN_WORDS.items() if word in marks)
    for word in frozenset().union(*_LATIN_WORDS.values())
}
_LATIN_LETTERS: dict[str, str] = {"es": "ñ¿¡", "fr": "çœ", "de": "ßäöü", "pt": "ãõ", "tr": "ğış"}
# Scripts that name one language (or the one most of its writers use), with the letters that
# single out a neighbour written in the same script.
_SCRIPTS: list[tuple[str, re.Pattern[str], tuple[tuple[str, str], ...]]] = [
    ("ja", re.compile("[\u3040-\u30ff]"), ()),
    ("zh", re.compile("[\u3400-\u4dbf\u4e00-\u9fff]"), ()),
    ("ko", re.compile("[\uac00-\ud7af]"), ()),
    ("ru", re.compile("[\u0400-\u04ff]"), (("uk", "іїєґ"),)),
    ("el", re.compile("[\u0370-\u03ff]"), ()),
    ("ar", re.compile("[\u0600-\u06ff]"), (("fa", "پچژگ"),)),
    ("he", re.compile("[\u0590-\u05ff]"), ()),
    ("hi", re.compile("[\u0900-\u097f]"), ()),
    ("hy", re.compile("[\u0530-\u058f]"), ()),
    ("th", re.compile("[\u0e00-\u0e7f]"), ()),
    ("ta", re.compile("[\u0b80-\u0bff]"), ()),
]
_WORD = re.compile(r"[^\W\d_]+")


def detect_language(message: str) -> str | None:
    """The language a message is clearly written in, or None when it does not say enough.

    Decided by the script first; Latin script by its short function words and letters, and only
    with at least three such words and none of another language as many. No model, no download.
    """
    found = _WORD.findall(message)
    letters = "".join(found)
    if len(letters) < 4:
        return None
    # Every message is asked until the language is known: ASCII text has none of the scripts' or
    # the marking letters, so it is told apart in C.
    if not letters.isascii():
        for code, pattern, neighbours in _SCRIPTS:
            if len(pattern.findall(letters)) >= max(2, len(letters) // 3):
                lower = letters.lower()
                return next((other for other, marks in neighbours if any(c in lower for c in marks)), code)
    scores = dict.fromkeys(_LATIN_WORDS, 0)
    for word in found:
        for code in _LANGUAGES_OF.get(word.lower(), ()):
            scores[code] += 1
    if not message.isascii():
        lowered = message.lower()
        for code, marks in _LATIN_LETTERS.items():
            scores[code] += sum(lowered.count(c) for c in marks)
    ranked = sorted(scores.items(), key=lambda item: -item[1])
    (best, score), (_, second) = ranked[0], ranked[1]
    return best if score >= 3 and score > second else None


def parse_language(name: str) -> str | None:
    """A language code from a code ("fr", "pt-BR") or a name ("French", "русский"); None if unknown."""
    wanted = name.strip().lower()
    code = wanted.split("-")[0].split("_")[0]
    if len(code) == 2 and code.isascii() and code.isalpha():
        return code
    return next((c for c, names in LANGUAGE_NAMES.items() if wanted in names), None)


async def set_language(session: AsyncSession, user_id: int, language: str) -> None:
    """Store the user's language and re-index their rows under it (PostgreSQL), in the caller's
    transaction, so their whole history is searched the same way from the next search on."""
    await session.execute(update(User).where(User.id == user_id).values(language=language))
    if session.get_bind().dialect.name != "postgresql":
        return  # SQLite's index is the same for every language; only the queries change
    for table in ("transcript_messages", "day_segments"):
        await session.execute(
            text(
                f"UPDATE {table} SET search_config = nikita_search_config(:language) "
                "WHERE user_id = :user_id AND search_config <> nikita_search_config(:language)"
            ),
            {"language": language, "user_id": user_id},
        )
