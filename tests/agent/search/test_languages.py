"""Full text beyond English: the user's language stems their words on both databases, accents
typed or not match, Chinese (no spaces) is found by its characters, and a language set after the
messages were stored still finds them."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.search.language import detect_language, set_language
from tests.agent.search.corpus import add_day, add_user, make_recall, recall_settings

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)

# (language, the turn to find, a question about it in other word forms, turns that must lose)
CASES = [
    (
        "fr",
        "Nous avons visité le château de Versailles avec ma grand-mère en été.",
        "visites des chateaux",  # no accents, other forms: no word as stored
        ["Le restaurant était fermé ce soir-là.", "Ma sœur travaille à Lyon depuis deux ans."],
    ),
    (
        "ru",
        "Моя сестра переехала в Москву прошлой осенью.",
        "Москва сестры",  # other case endings: no word as stored
        ["Вчера я купил новую книгу о кошках.", "На работе было очень много встреч."],
    ),
    (
        "es",
        "Mi hermano compró una guitarra nueva y aprendió una canción en Sevilla.",
        "¿guitarras de hermanos? cancion",  # plural forms, accent left out
        ["Ayer llovió todo el día en Madrid.", "Mi madre prepara una paella los domingos."],
    ),
    (
        "zh",
        "我昨天在北京买了一只小猫，它非常可爱。",
        "在哪里买的小猫？",  # no spaces: found by its character pairs
        ["今天的天气很好，我们去公园散步了。", "我的工作最近特别忙，每天都加班。"],
    ),
]


@pytest.mark.both_databases
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
async def test_the_users_language_finds_the_turn(
    sessions: async_sessionmaker[AsyncSession], case: tuple[str, str, str, list[str]]
) -> None:
    language, wanted, question, others = case
    recall = make_recall(recall_settings(search_previous_turn_weight=0.0), sessions, vectors=False)
    user = await add_user(sessions, f"cli:{language}")
    async with sessions() as session, session.begin():
        await set_language(session, user, language)
    _, first = await add_day(sessions, user, date(2026, 2, 10), [others[0], wanted])
    await add_day(sessions, user, date(2026, 2, 11), [others[1], "…"])
    hits = await recall.search(user, question, now=NOW)
    assert hits and hits[0].message_id == first[1]


@pytest.mark.both_databases
async def test_a_language_set_later_still_finds_what_was_stored(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # Stored while the language was unknown (English stemming on PostgreSQL), then set to Russian:
    # the stored rows are indexed again, so a question in another case ending finds them.
    recall = make_recall(recall_settings(), sessions, vectors=False)
    user = await add_user(sessions, "cli:late")
    _, ids = await add_day(sessions, user, date(2026, 2, 1), ["Я подарила маме красивую вазу.", "Ок"])
    async with sessions() as session, session.begin():
        await set_language(session, user, "ru")
    hits = await recall.search(user, "что за ваза для мамы", now=NOW)
    assert hits and hits[0].message_id == ids[0]
    # And back: nothing stored is lost when the language changes again.
    async with sessions() as session, session.begin():
        await set_language(session, user, "en")
    hits = await recall.search(user, "вазу маме", now=NOW)
    assert hits and hits[0].message_id == ids[0]


@pytest.mark.parametrize(
    ("message", "language"),
    [
        ("Hello! How was your weekend? I went to the park with my dog.", "en"),
        ("Salut ! Je suis allé au marché avec ma sœur, et c'était super.", "fr"),
        ("Hola, ayer fui al mercado con mi hermana y compramos manzanas.", "es"),
        ("Привет! Вчера я весь день гулял по городу.", "ru"),
        ("Привіт! Я їду додому після роботи.", "uk"),
        ("我昨天在北京买了一只小猫。", "zh"),
        ("今日は東京で友達と会いました。", "ja"),
        ("سلام، امروز هوا خیلی خوب است و من به پارک رفتم", "fa"),
        ("ok", None),
        ("Paris!", None),
    ],
)
def test_detects_a_language_only_when_the_message_says_it(message: str, language: str | None) -> None:
    assert detect_language(message) == language
