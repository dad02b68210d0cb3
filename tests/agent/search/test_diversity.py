"""Questions across the conversations, in every language the search serves: an order or a progress
spreads its best hits over the person's days, a summary reads both speakers' turns."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.search.diversity import is_overview, is_summary, spread_over_days
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
DAY_1, DAY_2 = date(2026, 2, 1), date(2026, 2, 8)


@pytest.mark.parametrize(
    ("language", "query"),
    [
        ("en", "Can you list the order in which I brought up different aspects of my budget app?"),
        (None, "How did my thesis progress throughout our conversations?"),
        ("en", "How many columns did I add across my requests?"),
        ("fr", "Quels sujets ai-je abordés à travers nos conversations ?"),
        ("fr", "Comment mon projet a-t-il évolué au fil de nos conversations ?"),
        ("es", "¿Cómo avanzó mi proyecto a lo largo de las sesiones?"),
        ("de", "In welcher Reihenfolge habe ich die Themen angesprochen?"),
        ("it", "Come è andato il mio progetto nel corso delle settimane?"),
        ("pt", "Como meu projeto evoluiu ao longo do tempo?"),
        ("nl", "Wat was de volgorde van mijn vragen?"),
        ("ru", "В каком порядке я рассказывал о проекте?"),
        ("uk", "Як мій проєкт змінювався протягом місяця?"),
        ("zh", "我的项目进展如何"),
        ("ja", "私のプロジェクトの進捗は"),
    ],
)
def test_an_order_or_a_progress_is_an_overview(language: str | None, query: str) -> None:
    assert is_overview(query, language)
    assert not is_summary(query, language)


@pytest.mark.parametrize(
    ("language", "query"),
    [
        ("en", "Summarize how my resume developed over time"),
        ("fr", "Résume comment mon projet a évolué au fil de nos conversations"),
        ("es", "¿Puedes resumir cómo avanzó mi proyecto?"),
        ("de", "Fasse zusammen, was ich über den Umzug gesagt habe: eine Zusammenfassung"),
        ("it", "Riassumi come è andato il mio progetto"),
        ("pt", "Resuma como meu projeto evoluiu"),
        ("nl", "Geef een samenvatting van mijn project"),
        ("ru", "Кратко перескажи, как продвигался мой проект"),
        ("uk", "Підсумуй, як розвивався мій проєкт"),
        ("zh", "总结一下我的项目"),
        ("ja", "私のプロジェクトをまとめて"),
    ],
)
def test_a_summary_is_read_in_the_persons_language(language: str, query: str) -> None:
    assert is_summary(query, language)
    # A summary is not spread over days: it reads both speakers instead.
    assert not is_overview(query, language)


@pytest.mark.parametrize(
    ("language", "query"),
    [
        ("en", "What did Anna adopt last May?"),
        ("en", "How many days passed between my first sprint and the deadline?"),
        ("en", "I went there in order to see the garden"),
        # "Across" spans things here, not the conversations.
        ("en", "How did I confirm the ratio was consistent across all comparisons?"),
        # A resume is a CV in English, whatever the French word for a summary.
        ("en", "How should I design my resume?"),
        ("ru", "Где я купила квартиру?"),
        ("zh", "我在哪里买的小猫"),
        ("fr", "Quel jardin ai-je mentionné ?"),
    ],
)
def test_a_question_about_one_turn_is_neither(language: str, query: str) -> None:
    assert not is_overview(query, language)
    assert not is_summary(query, language)


def test_a_crowded_day_gives_way_to_another_day() -> None:
    scores = {1: 1.0, 2: 0.9, 3: 0.85, 4: 0.7}
    days = {1: DAY_1, 2: DAY_1, 3: DAY_1, 4: DAY_2}
    out = spread_over_days([1, 2, 3, 4], scores, days, 0.7)
    # 0.9 x 0.7 = 0.63 < 0.7: the other day's turn comes second; each keeps the score it was taken at.
    assert sorted(out, key=lambda i: -out[i]) == [1, 4, 2, 3]
    assert out == {1: 1.0, 4: 0.7, 2: pytest.approx(0.63), 3: pytest.approx(0.85 * 0.49)}
    assert spread_over_days([1, 2, 3, 4], scores, days, 1.0) == scores


@pytest.mark.both_databases
@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_an_order_across_the_conversations_reaches_another_day(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    user = await add_user(sessions, "cli:order")
    # The first day talked of the budget app at length; the later day brought up one more aspect.
    _, first = await add_day(
        sessions,
        user,
        DAY_1,
        [
            "my budget app login page",
            "sure",
            "my budget app login page again",
            "ok",
            "my budget app login page once more",
            "ok",
        ],
    )
    _, later = await add_day(sessions, user, DAY_2, ["my budget app login", "nice"])
    question = "in what order did I bring up my budget app login page?"
    spread = make_recall(recall_settings(), sessions, vectors=vectors)
    crowded = make_recall(recall_settings(search_overview_day_factor=1.0), sessions, vectors=vectors)

    plain = [h.message_id for h in await crowded.search(user, question, now=NOW, limit=3)]
    hits = [h.message_id for h in await spread.search(user, question, now=NOW, limit=3)]

    assert plain == [first[0], first[2], first[4]]  # the first day's three turns fill the list
    assert later[0] in hits and len(set(hits) & set(first)) == 2


@pytest.mark.both_databases
async def test_a_summary_reads_what_the_bot_said_too(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Full text alone: the two turns hold the same words, only the speaker tells them apart.
    recall = make_recall(recall_settings(search_previous_turn_weight=0.0), sessions, vectors=False)
    user = await add_user(sessions, "cli:summary")
    _, ids = await add_day(
        sessions, user, DAY_1, ["resume tips for my interview", "resume tips for my interview"]
    )
    mine = await recall.search(user, "what resume tips did I note for my interview?", now=NOW)
    summary = await recall.search(user, "summarize the resume tips for my interview", now=NOW)
    assert mine[0].message_id == ids[0] and mine[1].score < mine[0].score  # "I": the person's turn
    assert summary[0].score == summary[1].score  # a summary: both sides alike
    off = make_recall(
        recall_settings(search_previous_turn_weight=0.0, search_summary_both_speakers=False),
        sessions,
        vectors=False,
    )
    lowered = await off.search(user, "summarize the resume tips for my interview", now=NOW)
    assert lowered[0].message_id == ids[0] and lowered[1].score < lowered[0].score
