"""What reaches the database is UTF-8 without NULs: lone surrogates become U+FFFD, pairs stay whole."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from db.engine import storable_json, storable_text

# Characters UTF-8 can encode, with lone surrogates, NULs and backslashes that look like escapes.
_pieces = st.one_of(
    st.characters(codec="utf-8"),
    st.sampled_from(["\ud800", "\udbff", "\udc00", "\udfff", "\x00", "\\", "\\u0000", "\\ud800"]),
    st.just("\U0001f600"),
)
_texts = st.lists(_pieces, max_size=12).map("".join)


def _expected(text: str) -> str:
    return text.replace("\x00", "").encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")


@given(_texts)
def test_a_string_parameter_becomes_storable(text: str) -> None:
    stored = storable_text(text)
    assert stored == _expected(text)
    stored.encode("utf-8")  # raises if anything UTF-8 cannot hold is left


@given(st.dictionaries(_texts, st.lists(_texts, max_size=3), max_size=3))
def test_a_json_document_becomes_storable_and_keeps_everything_else(value: dict[str, list[str]]) -> None:
    document = storable_json(value)
    document.encode("utf-8")
    assert "\\u0000" not in document.replace("\\\\", "")
    # Two keys that differ only in what gets replaced collapse into one: the later wins, as in JSON.
    expected = {_expected(key): [_expected(item) for item in items] for key, items in value.items()}
    assert json.loads(document) == expected


def test_a_pair_held_as_two_code_points_is_joined_and_halves_are_replaced() -> None:
    assert storable_text("\ud83d\ude00 \ud83d \ude00") == "\U0001f600 \ufffd \ufffd"
    assert json.loads(storable_json({"k\udc00": "a\\ud800\x00b\ud800"})) == {"k\ufffd": "a\\ud800b\ufffd"}
