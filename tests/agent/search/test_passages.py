"""Passages of long messages: cut within a budget, embedded as sections naming their message, scored
lexically by the best of them, forgotten with the person."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import forget_user
from agent.search.chunks import ChunkMessage, build_chunks, section_keys
from agent.search.language import lexical_terms
from agent.search.passages import PASSAGE_WORDS, TermMatcher, passage_spans, word_count
from db.models import SearchChunk
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)

_FILLER = [
    "We went through the plan for the week, the chores and the errands that were left.",
    "The weather turned cold again, so the walk was short and the evening quiet.",
    "A colleague asked about the report; I promised a draft by the end of the month.",
    "Dinner was simple tonight: rice, vegetables and a little soup from yesterday.",
]


def _answer(middle: str, paragraphs: int = 8) -> str:
    """A long assistant answer of several paragraphs with `middle` as one of them."""
    parts = [" ".join(_FILLER[(i + j) % len(_FILLER)] for j in range(3)) for i in range(paragraphs)]
    parts.insert(paragraphs // 2, middle)
    return "\n\n".join(parts)


def test_spans_cover_the_text_within_the_budget() -> None:
    text = _answer("Feed the sourdough starter twice a day.")
    spans = passage_spans(text, 40, word_count)
    assert len(spans) > 1
    assert all(word_count(text[a:b]) <= 40 for a, b in spans)
    # In order, nothing lost but the blank lines between them.
    assert [a for a, _ in spans] == sorted(a for a, _ in spans)
    assert " ".join(text[a:b] for a, b in spans).split() == text.split()
    # A text within the budget, or without any place to cut, is one span.
    assert passage_spans("short one", 40, word_count) == [(0, 9)]
    assert passage_spans("猫" * 300, 40, word_count) == [(0, 300)]


def test_a_long_message_is_embedded_as_its_passages() -> None:
    long_text = _answer("Feed the sourdough starter twice a day.")
    at = datetime(2026, 2, 1, tzinfo=UTC)
    messages = [
        ChunkMessage(1, 7, "How do I keep a starter alive?", at, 8, "Ann"),
        ChunkMessage(2, 7, long_text, at, word_count(long_text), "Nikita"),
        ChunkMessage(3, 7, "Thanks!", at, 2, "Ann"),
    ]
    chunks = build_chunks(
        messages,
        target_tokens=400,
        max_tokens=800,
        overlap=0,
        section_tokens=40,
        count=word_count,
    )
    sections = [
        (c.message_ids[a:b], t) for c in chunks for (a, b), t in zip(c.sections, c.section_texts, strict=True)
    ]
    passages = [t for ids, t in sections if ids == [2]]
    assert len(passages) == len(passage_spans(long_text, 40, word_count)) > 1
    assert all(t.startswith("Nikita: ") and word_count(t) <= 41 for t in passages)
    assert sum("sourdough starter" in t for t in passages) == 1
    # Each passage keeps a key of its own, so a rebuilt chunk reuses each one's vector.
    keys = [key for c in chunks for key in section_keys(c.message_ids, c.sections)]
    assert len(keys) == len(set(keys))
    # Without a counter (or within the budget), a message is one section, as before.
    whole = build_chunks(messages, target_tokens=400, max_tokens=800, overlap=0, section_tokens=40)
    assert sum(c.message_ids[a:b] == [2] for c in whole for a, b in c.sections) == 1


def test_terms_are_found_the_way_full_text_reads_them() -> None:
    text = "Ich habe die Katzen gefüttert. Then we were running late and fed the cats."
    english = TermMatcher(lexical_terms(["runs", "cat"], "en", stem=False), "en")
    runs, cats = english.positions(text)
    assert [text[p : p + 7] for p in runs] == ["running"]
    assert [text[p : p + 4] for p in cats] == ["cats"]
    # Another language's stems are prefixes (SQLite's query side); accents are folded.
    german = TermMatcher(lexical_terms(["katze", "gefuttert"], "de", stem=True), "de")
    assert all(len(places) == 1 for places in german.positions(text))


@pytest.mark.both_databases
@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_a_long_answer_is_found_by_the_passage_that_holds_the_question(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=vectors)
    user = await add_user(sessions, "cli:baker")
    answer = _answer("Feed the sourdough starter twice a day on a schedule, with equal flour and water.")
    assert word_count(answer) > 2 * PASSAGE_WORDS
    _, ids = await add_day(sessions, user, date(2026, 2, 1), ["How do I look after my bread?", answer])
    # Shorter, and holding most of the question's words, but not what the question asks.
    _, other = await add_day(
        sessions,
        user,
        date(2026, 2, 5),
        ["My sourdough starter smells odd today, and the flour bag is empty. " + " ".join(_FILLER)],
    )
    for day in range(6, 12):
        await add_day(sessions, user, date(2026, 2, day), _FILLER[: 2 + day % 3])
    hits = await recall.search(user, "sourdough starter feeding schedule water", now=NOW)
    ranked = [h.message_id for h in hits]
    assert ranked.index(ids[1]) < ranked.index(other[0])
    # The hit names the message, and shows the passage that matched.
    hit = hits[ranked.index(ids[1])]
    assert hit.kind == "message" and "twice a day on a schedule" in (hit.snippet or "")


@pytest.mark.both_databases
async def test_forget_removes_the_passages(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    gone = await add_user(sessions, "cli:gone-long")
    kept = await add_user(sessions, "cli:kept-long")
    answer = _answer("The zebra crossing by the school gets a new light in April.")
    for user in (gone, kept):
        await add_day(sessions, user, date(2026, 2, 1), ["What about the crossing?", answer])
    assert await recall.search(gone, "zebra crossing light", now=NOW)
    async with sessions() as session:
        rows = (await session.execute(select(SearchChunk.sections).where(SearchChunk.user_id == gone))).all()
        # The long answer stands as several sections (its passages), each naming it.
        assert sum(len(sections) for (sections,) in rows) > len(answer.split("\n\n")) // 2
    await forget_user(sessions, gone, [recall])
    async with sessions() as session:
        assert await session.scalar(select(func.count()).where(SearchChunk.user_id == gone)) == 0
    assert await recall.search(gone, "zebra crossing light", now=NOW) == []
    found = await recall.search(kept, "zebra crossing light", now=NOW)
    assert found and found[0].message_id is not None
