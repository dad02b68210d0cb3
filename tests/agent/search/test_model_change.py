"""Changing the embedding model never mixes vectors: full text answers for what the current model has
not embedded, and a reindex moves everything to it. Against the fake OpenAI-compatible server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, date, datetime

import pytest
from pydantic import SecretStr
from pydantic_ai.models import override_allow_model_requests
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.search.embedders import build_embedder
from agent.search.embeddings import Embedder
from agent.search.model_embedder import ModelEmbedder
from agent.search.recall import Recall
from bench.fakes.embeddings_api import FakeEmbeddings
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import SearchChunk
from db.repositories.usage import UsageRepository
from tests.agent.search.corpus import add_day, add_user, recall_settings

pytestmark = pytest.mark.both_databases

NOW = datetime(2026, 3, 3, tzinfo=UTC)


@pytest.fixture
def server() -> Iterator[FakeEmbeddings]:
    with FakeEmbeddings(width=24) as fake, override_allow_model_requests(True):
        yield fake


async def started(server: FakeEmbeddings) -> ModelEmbedder:
    """The embedder a fresh process builds from the settings (its width asked of the server)."""
    settings = recall_settings(
        embedder="openai:fake-embed",
        embedder_base_url=server.base_url,
        embedder_api_key=SecretStr("sk-local"),
    )
    embedder = build_embedder(settings)
    assert embedder is not None
    await embedder.prepare()
    return embedder


def recall_with(sessions: async_sessionmaker[AsyncSession], embedder: Embedder | None) -> Recall:
    dialect = sessions.kw["bind"].dialect.name
    return Recall(settings=recall_settings(), sessions=sessions, dialect=dialect, embedder=embedder)


async def spaces(sessions: async_sessionmaker[AsyncSession], user: int) -> dict[tuple[str, int], set[int]]:
    """Which messages each vector space (embedder, width) holds."""
    out: dict[tuple[str, int], set[int]] = {}
    async with sessions() as session:
        rows = await session.execute(
            select(SearchChunk.embedder, SearchChunk.dimensions, SearchChunk.message_ids).where(
                SearchChunk.user_id == user, SearchChunk.kind == "messages"
            )
        )
        for name, width, ids in rows:
            out.setdefault((name, width), set()).update(ids)
    return out


async def test_a_dimension_change_never_mixes_vectors(
    sessions: async_sessionmaker[AsyncSession], server: FakeEmbeddings
) -> None:
    first = recall_with(sessions, await started(server))
    user = await add_user(sessions, "cli:widths")
    _, old = await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper painted a boat", "wow"])
    assert (await first.search(user, "lighthouse keeper", now=NOW))[0].message_id == old[0]
    assert await spaces(sessions, user) == {("openai:fake-embed", 24): set(old)}

    # The provider changes its model's width: nothing of the new width is stored, full text answers.
    server.width = 16
    _, middle = await add_day(sessions, user, date(2026, 2, 2), ["my sister moved to Lisbon", "exciting"])
    assert (await first.search(user, "sister Lisbon", now=NOW))[0].message_id == middle[0]
    assert await spaces(sessions, user) == {("openai:fake-embed", 24): set(old)}

    # A restart asks the width again: what is new gets 16-wide vectors; the old ones wait for reindex.
    second = recall_with(sessions, await started(server))
    assert second.embedder is not None and second.embedder.dimensions == 16
    _, new = await add_day(sessions, user, date(2026, 2, 3), ["we planted plum trees in the orchard", "nice"])
    assert (await second.search(user, "plum trees orchard", now=NOW))[0].message_id == new[0]
    assert await spaces(sessions, user) == {
        ("openai:fake-embed", 24): set(old),
        ("openai:fake-embed", 16): set(middle + new),
    }
    # A message the current model has not embedded ranks by full text, as in a search without vectors.
    found = await second.search(user, "lighthouse keeper", now=NOW)
    full_text = await recall_with(sessions, None).search(user, "lighthouse keeper", now=NOW)
    assert found[0].message_id == full_text[0].message_id == old[0]
    assert found[0].score == full_text[0].score

    stats = await second.reindex(now=NOW, user_ids=[user])
    assert stats.messages == len(old + middle + new)
    assert await spaces(sessions, user) == {("openai:fake-embed", 16): set(old + middle + new)}
    assert (await second.search(user, "lighthouse keeper", now=NOW))[0].message_id == old[0]


async def test_switching_models_embeds_only_what_is_new(
    sessions: async_sessionmaker[AsyncSession], server: FakeEmbeddings
) -> None:
    # From one model to another: the catch-up before a search never re-embeds history.
    hosted = recall_with(sessions, await started(server))
    local = recall_with(sessions, HashingEmbedder(dimensions=48))
    user = await add_user(sessions, "cli:switch")
    _, old = await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper", "wow"], summary="lamp")
    await local.index_user(user, now=NOW)
    requests = len(server.bodies)
    _, new = await add_day(sessions, user, date(2026, 2, 2), ["plum trees", "nice"])
    await hosted.index_user(user, now=NOW)
    embedded = [text for body in server.bodies[requests:] for text in body["input"]]
    assert embedded and all("lighthouse" not in text and "lamp" not in text for text in embedded)
    async with sessions() as session:  # a hosted model's tokens are the user's spend
        (spend,) = await UsageRepository(session).for_user(user, since=NOW.date())
    assert (spend.kind, spend.calls) == ("embedding", len(server.bodies) - requests)
    assert spend.input_tokens == sum(len(text.split()) for text in embedded)  # the fake counts words
    assert await spaces(sessions, user) == {
        ("hashing", 48): set(old),
        ("openai:fake-embed", 24): set(new),
    }


async def test_a_slow_embedder_never_holds_a_search(
    sessions: async_sessionmaker[AsyncSession], server: FakeEmbeddings
) -> None:
    embedder = await started(server)
    dialect = sessions.kw["bind"].dialect.name
    settings = recall_settings(embedder_search_timeout_seconds=0.1)
    recall = Recall(settings=settings, sessions=sessions, dialect=dialect, embedder=embedder)
    user = await add_user(sessions, "cli:slow")
    _, ids = await add_day(sessions, user, date(2026, 2, 1), ["the lighthouse keeper", "wow"])
    server.gate.clear()  # the provider answers nothing until the search has returned
    try:
        # Neither the catch-up nor the query's vector is waited for: a search that waited for the
        # held provider would never return, and the deadline would fail the test instead of hanging it.
        hits = await asyncio.wait_for(recall.search(user, "lighthouse keeper", now=NOW), timeout=60)
    finally:
        server.gate.set()
    assert hits[0].message_id == ids[0]  # full text found it
    await recall.settle()  # the catch-up went on in the background and finished
    assert await spaces(sessions, user) == {("openai:fake-embed", 24): set(ids)}
