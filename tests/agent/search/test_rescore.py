"""The rescoring signals of conversation_search: previous turn, named speaker, named days."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.core.errors import RecallInputError
from agent.search.dates import DayRange
from agent.search.rescore import Signals, final_scores, with_previous_turn
from agent.search.turns import TurnInfo, named_role
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)
DAY = date(2026, 2, 1)


def signals(**overrides: object) -> Signals:
    values: dict[str, object] = {
        "vector_weight": 0.0,
        "lexical_weight": 1.0,
        "previous_turn_weight": 0.5,
        "other_speaker_factor": 0.8,
        "date_boost": 0.5,
        "named_role": None,
        "days": [],
        **overrides,
    }
    return Signals(**values)  # type: ignore[arg-type]


def test_previous_turn_lends_its_words() -> None:
    info = {1: TurnInfo("assistant", DAY, None, 2), 2: TurnInfo("user", DAY, 1, None)}
    assert with_previous_turn({1: 4.0}, info, 0.5) == {1: 4.0, 2: 2.0}
    assert with_previous_turn({1: 4.0}, info, 0.0) == {1: 4.0, 2: 0.0}


def test_speaker_and_day_factors() -> None:
    info = {1: TurnInfo("user", DAY, None, None), 2: TurnInfo("assistant", date(2026, 2, 9), None, None)}
    plain = final_scores([1, 2], cosine={}, lexical={1: 1.0, 2: 1.0}, info=info, signals=signals())
    assert plain == {1: 1.0, 2: 1.0}
    by_user = final_scores(
        [1, 2], cosine={}, lexical={1: 1.0, 2: 1.0}, info=info, signals=signals(named_role="user")
    )
    assert by_user == {1: 1.0, 2: pytest.approx(0.8)}
    dated = final_scores(
        [1, 2],
        cosine={},
        lexical={1: 1.0, 2: 1.0},
        info=info,
        signals=signals(days=[DayRange(date(2026, 2, 8), date(2026, 2, 10))]),
    )
    assert dated == {1: 1.0, 2: pytest.approx(1.5)}


def test_named_role() -> None:
    assert named_role("What did Anna adopt?", user_name="Anna", persona_name="Nikita") == "user"
    assert named_role("what does nikita like", user_name="Anna Lee", persona_name="Nikita") == "assistant"
    assert named_role("Anna and Nikita's trip", user_name="Anna", persona_name="Nikita") is None
    assert named_role("the trip", user_name="Anna", persona_name="Nikita") is None
    assert named_role("Lee's dog", user_name="Anna Lee", persona_name="Nikita") == "user"
    # No name: the person's own words ("my", "I") are theirs, "you" is the bot.
    assert named_role("When does my first sprint end?", user_name="Anna", persona_name="Nikita") == "user"
    assert named_role("what did you suggest for it", user_name="Anna", persona_name="Nikita") == "assistant"
    assert named_role("what did you tell me about my app", user_name="Anna", persona_name="Nikita") is None
    assert named_role("what did Nikita tell me", user_name="Anna", persona_name="Nikita") == "assistant"
    # A request's frame ("can you", "walk me through") names no one: what it asks about does.
    assert named_role("Can you list what I brought up?", user_name="Anna", persona_name="Nikita") == "user"
    assert named_role("Walk me through my plans", user_name="Anna", persona_name="Nikita") == "user"
    assert (
        named_role("Could you remind me what you said", user_name="Anna", persona_name="Nikita")
        == "assistant"
    )
    # Without pronouns (a summary's question), only a name names a speaker.
    assert named_role("summarise my plans", user_name="Anna", persona_name="Nikita", pronouns=False) is None
    assert (
        named_role("summarise Anna's plans", user_name="Anna", persona_name="Nikita", pronouns=False)
        == "user"
    )


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_answer_found_through_the_question_before_it(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    recall = make_recall(recall_settings(), sessions, vectors=vectors)
    user = await add_user(sessions, "cli:qa")
    _, ids = await add_day(
        sessions, user, DAY, ["how did the coconut ice cream turn out?", "super rich and creamy!", "nice"]
    )
    hits = await recall.search(user, "coconut ice cream", now=NOW, limit=3)
    assert [h.message_id for h in hits][:2] == [ids[0], ids[1]]
    assert hits[0].next_turn is not None and hits[0].next_turn.text == "super rich and creamy!"
    assert hits[1].previous_turn is not None and hits[1].previous_turn.message_id == ids[0]
    off = make_recall(recall_settings(search_previous_turn_weight=0.0), sessions, vectors=vectors)
    without = [h.message_id for h in await off.search(user, "coconut ice cream", now=NOW)]
    assert ids[1] not in without[:2]  # without the signal the answer is no better than small talk


async def test_named_speaker_ranks_their_message_first(sessions: async_sessionmaker[AsyncSession]) -> None:
    # Only the speaker signal is under test: the second message does not also get the first's words.
    recall = make_recall(recall_settings(search_previous_turn_weight=0.0), sessions, vectors=False)
    user, _ = await get_or_create_user(sessions, key="cli:zoe", now=NOW, timezone="UTC", name="Zoe")
    # The persona's message comes later, so without the signal it wins the tie (newer message).
    _, ids = await add_day(sessions, user.id, DAY, ["I love sailing", "I love sailing"])
    hits = await recall.search(user.id, "does Zoe love sailing", now=NOW)
    assert hits[0].message_id == ids[0] and hits[0].speaker == "Zoe"
    persona = await recall.search(user.id, f"does {recall.settings.persona_name} love sailing", now=NOW)
    assert persona[0].message_id == ids[1] and persona[0].speaker == recall.settings.persona_name


async def test_named_day_ranks_that_days_message_first(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:dated")
    _, early = await add_day(sessions, user, date(2026, 1, 12), ["we baked bread", "yum"])
    _, late = await add_day(sessions, user, date(2026, 2, 20), ["we baked bread", "yum"])
    plain = await recall.search(user, "baked bread", now=NOW)
    assert plain[0].message_id == late[0]  # same text: the newer day wins the tie
    dated = await recall.search(user, "baked bread on 12 January", now=NOW)
    assert dated[0].message_id == early[0]
    assert dated[0].when == "Monday, 7 weeks ago"


async def test_the_days_the_caller_names_rank_first(sessions: async_sessionmaker[AsyncSession]) -> None:
    recall = make_recall(recall_settings(), sessions)
    user = await add_user(sessions, "cli:ranged")
    _, early = await add_day(sessions, user, date(2026, 1, 12), ["we baked bread", "yum"])
    _, late = await add_day(sessions, user, date(2026, 2, 20), ["we baked bread", "yum"])
    # The search tool's from_day / to_day: the person's local days, either end open.
    ranged = await recall.search(
        user, "baked bread", now=NOW, from_day=date(2026, 1, 1), to_day=date(2026, 1, 31)
    )
    assert ranged[0].message_id == early[0]
    assert (await recall.search(user, "baked bread", now=NOW, to_day=date(2026, 1, 20)))[
        0
    ].message_id == early[0]
    assert (await recall.search(user, "baked bread", now=NOW, from_day=date(2026, 2, 1)))[
        0
    ].message_id == late[0]
    # A boost, never a filter: the other day's message is still found.
    assert late[0] in [h.message_id for h in ranged]
    # The query's own words: the time before a day, or a span up to today.
    before = await recall.search(user, "baked bread before February 1", now=NOW)
    assert before[0].message_id == early[0]
    with pytest.raises(RecallInputError):
        await recall.search(user, "bread", now=NOW, from_day=date(2026, 2, 1), to_day=date(2026, 1, 1))
