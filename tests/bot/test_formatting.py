"""Markdown to Telegram text + entities, and cutting it at the length limit without breaking entities."""

from __future__ import annotations

import pytest
import telegramify_markdown
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.delivery.formatting import Chunk, render, utf16_len

EVERY_ENTITY = (
    "**bold** _italic_ ~~gone~~ `code` [a link](https://example.com/x) ||secret|| 😀🎉\n\n"
    "> quoted words\n\n"
    "```python\nprint('hi 👋')\n```\n"
)


def _span(chunk: Chunk, kind: str) -> list[str]:
    """The text each entity of `kind` covers, cut by UTF-16 offsets as Telegram does."""
    units = chunk.text.encode("utf-16-le")
    return [
        units[2 * e.offset : 2 * (e.offset + e.length)].decode("utf-16-le")
        for e in chunk.entities
        if e.type == kind
    ]


def test_every_entity_type_with_emoji_lands_on_the_right_words() -> None:
    [chunk] = render(EVERY_ENTITY)
    assert "**" not in chunk.text and "```" not in chunk.text
    assert _span(chunk, "bold") == ["bold"]
    assert _span(chunk, "italic") == ["italic"]
    assert _span(chunk, "strikethrough") == ["gone"]
    assert _span(chunk, "code") == ["code"]
    assert _span(chunk, "text_link") == ["a link"]
    assert _span(chunk, "spoiler") == ["secret"]
    assert _span(chunk, "blockquote") == ["quoted words"]
    assert _span(chunk, "pre") == ["print('hi 👋')"]
    [pre] = [e for e in chunk.entities if e.type == "pre"]
    [link] = [e for e in chunk.entities if e.type == "text_link"]
    assert (pre.language, link.url) == ("python", "https://example.com/x")


def test_a_long_reply_is_cut_between_entities_never_inside_a_code_block() -> None:
    block = "```\n" + "\n".join(f"line {n} of code" for n in range(60)) + "\n```"
    paragraph = "Some **bold words** and _more text_ here. " * 12
    markdown = "\n\n".join([paragraph, block] * 8)
    assert len(markdown) > 10_000
    chunks = render(markdown)
    assert len(chunks) >= 3
    for chunk in chunks:
        assert 0 < utf16_len(chunk.text) <= 4096
        for pre in _span(chunk, "pre"):
            assert pre.startswith("line 0 of code") and pre.endswith("line 59 of code")
        assert all(span == "bold words" for span in _span(chunk, "bold"))


def test_a_code_block_longer_than_a_message_is_split_into_valid_blocks() -> None:
    code = "\n".join(f"x = {n}  # 😀" for n in range(600))
    chunks = render(f"```python\n{code}\n```")
    assert len(chunks) >= 2
    for chunk in chunks:
        assert utf16_len(chunk.text) <= 4096
        [pre] = chunk.entities
        assert pre.type == "pre" and pre.language == "python"
        assert pre.offset + pre.length <= utf16_len(chunk.text)
    assert "\n".join(c.text for c in chunks) == code


def test_empty_and_whitespace_replies_give_no_chunks() -> None:
    assert render("") == [] and render(" \n ") == []


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(["word", "**bold**", "_it_", "`c`", "😀", "\n", "\n\n", ". ", "```\ncode\n```\n"]),
        max_size=3000,
    )
)
def test_chunks_fit_and_entities_stay_inside(parts: list[str]) -> None:
    for chunk in render(" ".join(parts), limit=500):
        size = utf16_len(chunk.text)
        assert 0 < size <= 500 and chunk.text == chunk.text.strip()
        assert all(e.length > 0 and e.offset + e.length <= size for e in chunk.entities)


def test_a_converter_failure_sends_the_words_plain(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(markdown: str) -> None:
        raise RecursionError("nested too deep")

    # The third-party converter breaking (deeply nested model output, a parser bug): plain text.
    monkeypatch.setattr(telegramify_markdown, "convert", broken)
    assert render("**still** here") == [Chunk("**still** here")]
