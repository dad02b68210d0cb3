"""`python -m bot reindex`: rebuilds full text and embeddings for all users or one, with a summary line."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest
from pydantic_ai.models import override_allow_model_requests
from sqlalchemy import func, select

from agent.core.settings import Settings
from bench.fakes.embeddings_api import FakeEmbeddings
from bot.cli.reindex import run_graph_rebuild, run_reindex
from db.engine import create_engine, session_factory
from db.migrate import schema_at_head
from db.models import SearchChunk
from tests.agent.search.corpus import add_day, add_user
from tests.conftest import migrated_sqlite_url


async def test_reindex_all_and_one(
    tmp_path: Path, migrated_sqlite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "r.db")
    engine = create_engine(url)
    sessions = session_factory(engine)
    ann = await add_user(sessions, "cli:ann")
    await add_day(sessions, ann, date(2026, 2, 1), ["the orchard by the river", "lovely"])
    settings = Settings(database_url=url, embedder="minilm", _env_file=None)
    assert await run_reindex(settings) == 0
    assert "reindexed 1 user(s): 2 messages in 1 chunks" in capsys.readouterr().out
    assert await run_reindex(settings, user_key="cli:ann") == 0
    assert await run_reindex(settings, user_key="cli:nobody") == 1
    async with sessions() as session:
        assert await session.scalar(select(func.count(SearchChunk.id))) == 1
    off = settings.model_copy(update={"embedder": "none"})
    assert await run_reindex(off) == 0
    assert "embeddings off" in capsys.readouterr().out
    await engine.dispose()


async def test_reindex_migrates_a_database_never_migrated(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'new.db'}"
    assert await run_reindex(Settings(database_url=url, embedder="none", _env_file=None)) == 0
    assert "reindexed 0 user(s)" in capsys.readouterr().out
    assert await schema_at_head(url)


async def test_reindex_moves_every_vector_to_the_current_model(
    tmp_path: Path, migrated_sqlite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "r.db")
    engine = create_engine(url)
    sessions = session_factory(engine)
    ann = await add_user(sessions, "cli:ann")
    await add_day(sessions, ann, date(2026, 2, 1), ["the orchard by the river", "lovely"], summary="orchard")
    assert await run_reindex(Settings(database_url=url, embedder="minilm", _env_file=None)) == 0
    capsys.readouterr()
    with FakeEmbeddings(width=12) as server, override_allow_model_requests(True):
        hosted = Settings(  # type: ignore[call-arg]
            database_url=url,
            embedder="openai:fake-embed",
            embedder_base_url=server.base_url,
            embedder_api_key="sk-local",
            _env_file=None,
        )
        assert await run_reindex(hosted) == 0
    out = capsys.readouterr().out
    assert "embeddings: openai:fake-embed, replacing 2 chunks of other models" in out
    sent = sum(len(text.split()) for body in server.bodies for text in body["input"])
    assert f"{sent} tokens sent" in out  # the fake counts words as tokens
    async with sessions() as session:
        found = select(SearchChunk.embedder, SearchChunk.dimensions).distinct()
        spaces = (await session.execute(found)).all()
    assert spaces == [("openai:fake-embed", 12)]
    await engine.dispose()


async def test_graph_from_facts_refuses_a_graph_that_is_off_or_an_unknown_user(
    tmp_path: Path, migrated_sqlite: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "g.db")
    engine = create_engine(url)
    await add_user(session_factory(engine), "cli:ann")
    off = Settings(database_url=url, embedder="none", graph_backend="none", _env_file=None)
    assert await run_graph_rebuild(off) == 1
    assert "the knowledge graph is off" in capsys.readouterr().err
    assert await run_graph_rebuild(off, user_key="cli:nobody") == 1
    assert "no user with key 'cli:nobody'" in capsys.readouterr().err
    await engine.dispose()
