"""What full-text search does to text before either database indexes it, and which PostgreSQL
text-search configuration each language gets.

Both databases index the same shape of text: Latin letters folded to their base letter (and
Russian "ё" to "е"), so a word typed without its accents still matches; and every Chinese or
Japanese character a word of its own, because those scripts put no spaces between words (a query
then asks for adjacent characters, see agent/search/language.py). SQLite applies `search_text`
through a function registered on every connection (db/engine.py); PostgreSQL applies the same
mapping with `translate` and `regexp_replace` inside its generated columns (db/ddl/search.py).
"""

from __future__ import annotations

import re
import unicodedata

# ISO 639-1 code -> PostgreSQL's built-in text-search configuration (stemmer and stop words).
# Any other language is indexed with `simple` (lower-cased words, no stemming).
POSTGRES_CONFIGS: dict[str, str] = {
    "ar": "arabic",
    "da": "danish",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "fi": "finnish",
    "fr": "french",
    "hu": "hungarian",
    "id": "indonesian",
    "it": "italian",
    "nl": "dutch",
    "no": "norwegian",
    "pt": "portuguese",
    "ro": "romanian",
    "ru": "russian",
    "sv": "swedish",
    "tr": "turkish",
}
DEFAULT_LANGUAGE = "en"

# Han (with its extensions and compatibility block) and the Japanese kana.
CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
CJK = re.compile(f"[{CJK_CLASS}]")


def _folds() -> tuple[str, str]:
    """Every precomposed Latin letter with marks (U+00C0-U+024F) and its base letter, plus ё -> е."""
    source, target = "ёЁ", "еЕ"
    for code in range(0xC0, 0x250):
        char = chr(code)
        parts = unicodedata.normalize("NFD", char)
        if len(parts) > 1 and parts[0].isascii() and parts[0].isalpha():
            if all(unicodedata.combining(p) for p in parts[1:]):
                source += char
                target += parts[0]
    return source, target


FOLD_FROM, FOLD_TO = _folds()
_FOLD = str.maketrans(FOLD_FROM, FOLD_TO)


def postgres_config(language: str | None) -> str:
    """The text-search configuration for a language code (`english` when none is known yet)."""
    return POSTGRES_CONFIGS.get(language or DEFAULT_LANGUAGE, "simple")


def fold(text: str) -> str:
    """Letters without their accents (the same mapping PostgreSQL's `translate` applies)."""
    return text.translate(_FOLD)


def search_text(text: str | None) -> str:
    """The text as both databases index it: folded, each CJK character set apart by spaces."""
    return CJK.sub(r" \g<0> ", fold(text or ""))
