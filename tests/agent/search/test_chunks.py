"""Chunking: contiguous runs inside one day, overlap, sections under the budget, every message covered."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from agent.search.chunks import ChunkMessage, build_chunks, split_text

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _messages(spec: list[tuple[int, int]]) -> list[ChunkMessage]:
    return [
        ChunkMessage(i + 1, day, f"m{i + 1}", T0 + timedelta(minutes=i), tokens)
        for i, (day, tokens) in enumerate(spec)
    ]


@given(
    spec=st.lists(st.tuples(st.integers(1, 3), st.integers(1, 120)), min_size=1, max_size=60).map(
        lambda items: sorted(items, key=lambda item: item[0])
    ),
    overlap=st.integers(0, 3),
)
def test_chunk_invariants(spec: list[tuple[int, int]], overlap: int) -> None:
    messages = _messages(spec)
    chunks = build_chunks(messages, target_tokens=100, max_tokens=200, overlap=overlap, section_tokens=40)
    by_id = {m.id: m for m in messages}
    covered: set[int] = set()
    for chunk in chunks:
        ids = chunk.message_ids
        assert ids == list(range(ids[0], ids[-1] + 1))  # contiguous
        assert {by_id[i].day_segment_id for i in ids} == {chunk.day_segment_id}  # one day
        assert len(ids) == 1 or chunk.token_count <= 200
        # Sections tile the chunk and stay under budget unless a message alone is larger.
        assert chunk.sections[0][0] == 0 and chunk.sections[-1][1] == len(ids)
        for (_, b), (c, _) in zip(chunk.sections, chunk.sections[1:], strict=False):
            assert b == c
        for a, b in chunk.sections:
            assert b - a == 1 or sum(by_id[i].tokens for i in ids[a:b]) <= 40
        covered.update(ids)
    assert covered == set(by_id)
    assert all(c.complete for c in chunks[:-1])


def test_overlap_within_a_day_only() -> None:
    messages = _messages([(1, 30)] * 8 + [(2, 30)] * 3)
    chunks = build_chunks(messages, target_tokens=90, max_tokens=200, overlap=1, section_tokens=60)
    assert [c.message_ids for c in chunks] == [[1, 2, 3], [3, 4, 5], [5, 6, 7], [7, 8], [9, 10, 11]]
    assert chunks[-1].complete  # reached the target


def test_sections_overlap() -> None:
    messages = _messages([(1, 10)] * 7)
    (chunk,) = build_chunks(
        messages, target_tokens=500, max_tokens=500, overlap=0, section_tokens=30, section_overlap=1
    )
    assert chunk.sections == [(0, 3), (2, 5), (4, 7)]
    assert chunk.section_texts[1] == "m3\nm4\nm5"


def test_split_text_by_paragraphs() -> None:
    text = "## Summary\nA day.\n\n## Goals\nRun.\n\n## Decisions\nRest."
    parts = split_text(text, 6, lambda t: len(t.split()))
    assert parts == ["## Summary\nA day.", "## Goals\nRun.\n\n## Decisions\nRest."]


def test_sections_name_their_speakers() -> None:
    messages = [
        ChunkMessage(1, 1, "I adopted a kitten", T0, 5, "Anna"),
        ChunkMessage(2, 1, "What is its name?", T0 + timedelta(minutes=1), 5, "Nikita"),
        ChunkMessage(3, 1, "unnamed", T0 + timedelta(minutes=2), 5),
    ]
    (chunk,) = build_chunks(messages, target_tokens=500, max_tokens=500, overlap=0, section_tokens=500)
    assert chunk.section_texts == ["Anna: I adopted a kitten\nNikita: What is its name?\nunnamed"]
