"""JSON from outside is parsed within a fixed depth; brackets inside strings do not count."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bot.errors import JsonInputError
from bot.web.json_input import MAX_DEPTH, loads, nesting_depth

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet=st.sampled_from('ab[]{}"\\ \n')),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=20,
)


def _depth(value: object) -> int:
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    return 0


@given(_json_values)
def test_the_scan_agrees_with_the_parsed_structure(value: object) -> None:
    assert nesting_depth(json.dumps(value).encode()) == _depth(value)


def test_a_body_nested_a_hundred_thousand_deep_is_refused_without_recursing() -> None:
    body = "[" * 100_000 + "]" * 100_000
    with pytest.raises(JsonInputError, match="nested deeper"):
        loads(body)


def test_depth_at_the_limit_parses_and_one_more_is_refused() -> None:
    at_limit = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert _depth(loads(at_limit)) == MAX_DEPTH
    with pytest.raises(JsonInputError):
        loads("[" + at_limit + "]")


def test_brackets_inside_strings_are_text() -> None:
    body = json.dumps({"text": "[[[[{{{{" * 100})
    assert loads(body) == {"text": "[[[[{{{{" * 100}


def test_what_is_not_json_is_refused_as_input() -> None:
    with pytest.raises(JsonInputError, match="not JSON"):
        loads(b"{not json")
    with pytest.raises(ValueError):  # callers that catch ValueError keep working
        loads(b"")
