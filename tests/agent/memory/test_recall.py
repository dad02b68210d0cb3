"""The facts recalled for a message and found by memory_search: the transcript's ranking over the one
list, in the person's language, with vectors when an embedder is on, and what the graph finds counted
through the list's facts its edges point back to."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.users import get_or_create_user
from agent.context.facts import STANDARD
from agent.core.settings import Settings
from agent.graph.base import EdgeFact
from agent.memory.graph import through_list
from agent.memory.service import Facts
from agent.memory.units import KIND_FACT_CHUNK, FactUnits, Known, KnownFact
from agent.memory.words import Postings
from agent.search.language import set_language
from agent.search.recall import Recall
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import SearchChunk
from tests.agent.search.corpus import add_day

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, 12, 0, tzinfo=UTC)


def _facts(sessions: async_sessionmaker[AsyncSession], *, vectors: bool) -> Facts:
    settings = Settings(_env_file=None, embedder="none")  # type: ignore[call-arg]
    units = FactUnits.from_settings(settings)
    dialect = sessions.kw["bind"].dialect.name
    embedder = HashingEmbedder() if vectors else None
    recall = Recall(settings=settings, sessions=sessions, dialect=dialect, embedder=embedder, units=units)
    return Facts(settings, recall, units=units)


async def _person(sessions: async_sessionmaker[AsyncSession], key: str, language: str | None = None) -> int:
    user, _ = await get_or_create_user(sessions, key=key, now=NOW, timezone="UTC")
    if language is not None:
        async with sessions() as session, session.begin():
            await set_language(session, user.id, language)
    return user.id


@pytest.mark.parametrize("vectors", [True, False], ids=["hybrid", "fts-only"])
async def test_the_facts_about_a_message_are_recalled_and_the_profiles_are_not_repeated(
    sessions: async_sessionmaker[AsyncSession], vectors: bool
) -> None:
    facts = _facts(sessions, vectors=vectors)
    ana = await _person(sessions, "cli:ana")
    lisbon = await facts.add(ana, "Ana lives in Lisbon", conversation_id=None, at=NOW)
    await facts.add(ana, "Ana's sister Ines is getting married in June", conversation_id=None, at=NOW)
    await facts.add(ana, "Ana is allergic to cats", conversation_id=None, at=NOW)

    found = await facts.for_message(ana, "my sister's wedding is coming up", limits=STANDARD, now=NOW)
    assert found[0] == "Ana's sister Ines is getting married in June"
    assert "Ana is allergic to cats" not in found
    assert (
        await facts.for_message(ana, "Lisbon", limits=STANDARD, now=NOW, exclude=frozenset({lisbon.fact_id}))
        == []
    )
    assert await facts.for_message(ana, "hi", limits=STANDARD, now=NOW) == []


async def test_a_persons_facts_are_matched_in_their_language(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    facts = _facts(sessions, vectors=False)
    lea = await _person(sessions, "cli:lea", "fr")
    await facts.add(lea, "Léa a déménagé à Lyon", conversation_id=None, at=NOW)
    await facts.add(lea, "Léa joue du violon", conversation_id=None, at=NOW)

    # Another form of the word, typed without accents: stemmed and folded as the transcript reads it.
    assert await facts.for_message(lea, "demenager", limits=STANDARD, now=NOW) == ["Léa a déménagé à Lyon"]
    assert [h.content for h in await facts.search(lea, "violons", limit=5, now=NOW)] == ["Léa joue du violon"]


def test_the_graph_counts_through_the_facts_its_edges_point_back_to() -> None:
    def fact(fact_id: int, text: str, *, hidden: bool = False) -> KnownFact:
        return KnownFact(fact_id, text, (), hidden, None, NOW, str(fact_id))

    known = Known(
        (0, 0, "", 0, 0, ""),
        (
            fact(1, "Ana lives in Lisbon"),
            fact(2, "Ana met Bo at the concert"),
            fact(3, "Ana dislikes figs", hidden=True),
        ),
        Postings([], None),
    )
    found = [
        EdgeFact("user", "Ana lives in Lisbon.", None, None, row_ids=(1,)),  # ranked by the list already
        EdgeFact("user", "Ana has a cat named Miso", None, None, row_ids=(4,)),  # taken back: not held
        EdgeFact("user", "Ana met Bo at the concert.", None, None, row_ids=(2,)),
        EdgeFact("user", "Ana met Bo", None, None, row_ids=(2, 3)),  # the same fact once; 3 is hidden
        EdgeFact("user", "an edge of no fact", None, None),
        EdgeFact("relationship", "We laughed about the broken tram", None, None),
    ]
    listed, others = through_list(found, known, lambda f: not f.hidden and f.id != 1)
    assert [f.content for f in listed] == ["Ana met Bo at the concert"]  # the list's words
    assert [f.text for f in others] == ["We laughed about the broken tram"]


async def test_a_recall_embeds_the_new_facts_not_the_transcripts_backlog(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    # A process that stopped before it embedded leaves a backlog: a message's recall must not wait
    # for it (seconds of a local model), only for the few new facts it ranks.
    facts = _facts(sessions, vectors=True)
    ana = await _person(sessions, "cli:ana")
    await add_day(
        sessions, ana, NOW.date(), [f"message {i} about the garden and the tomatoes" for i in range(12)]
    )
    await facts.add(ana, "Ana grows tomatoes on her balcony", conversation_id=None, at=NOW)

    found = await facts.for_message(ana, "how are my tomatoes", limits=STANDARD, now=NOW)
    await facts.index.settle()
    assert found == ["Ana grows tomatoes on her balcony"]
    async with sessions() as session:
        kinds = list(await session.scalars(select(SearchChunk.kind).where(SearchChunk.user_id == ana)))
    assert kinds == [KIND_FACT_CHUNK]  # the transcript is left for the turn's own pass
