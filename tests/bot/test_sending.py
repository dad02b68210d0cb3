"""Splitting long replies for Telegram's 4096-character limit."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.delivery.sending import LIMIT, split_text


@settings(max_examples=200)
@given(st.text(alphabet=st.sampled_from(list("ab .\n!,😀é")), max_size=20_000))
def test_chunks_fit_and_lose_nothing_but_whitespace(text: str) -> None:
    chunks = split_text(text)
    assert all(0 < len(c) <= LIMIT for c in chunks)
    squash = lambda s: "".join(s.split())  # noqa: E731
    assert squash("".join(chunks)) == squash(text)


def test_prefers_paragraphs_then_sentences() -> None:
    paragraph = "word " * 700  # 3500 characters
    chunks = split_text(paragraph.strip() + "\n\n" + paragraph.strip())
    assert len(chunks) == 2 and chunks[0] == paragraph.strip()
    sentences = ("This is a sentence. " * 300).strip()
    assert all(c.endswith(".") for c in split_text(sentences)[:-1])


def test_one_huge_word_is_cut_hard() -> None:
    assert [len(c) for c in split_text("x" * 9000)] == [LIMIT, LIMIT, 9000 - 2 * LIMIT]


def test_short_and_empty() -> None:
    assert split_text("hi") == ["hi"]
    assert split_text("  \n ") == []
