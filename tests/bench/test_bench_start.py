"""`bench start`'s database: its index is the product's own but for the most recently active people,
whose newest messages the start-up work must embed."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import select

from agent.core.settings import Settings
from agent.search.recall import Recall
from bench.start_data import Population, RandomVectors, populate, telegram_ids
from db.engine import create_engine, session_factory
from db.models import User
from tests.conftest import migrated_sqlite_url

NOW = datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


async def test_only_the_lagging_people_have_messages_to_embed(tmp_path: Path, migrated_sqlite: Path) -> None:
    url = migrated_sqlite_url(migrated_sqlite, tmp_path / "start.db")
    population = Population(people=5, messages=100, lagging_people=2, lagging_messages=7)
    settings = Settings(_env_file=None)
    await populate(url, population, now=NOW, settings=settings)
    engine = create_engine(url)
    sessions = session_factory(engine)
    try:
        async with sessions() as session:
            recent = list(
                await session.execute(select(User.id, User.telegram_id).order_by(User.last_message_at.desc()))
            )
        # The order the start warms people in is the order bench start writes to them.
        assert [telegram for _, telegram in recent] == telegram_ids(population)
        recall = Recall(settings=settings, sessions=sessions, dialect="sqlite", embedder=RandomVectors())
        caught_up = [(await recall.index_user(user, now=NOW)).messages for user, _ in recent]
    finally:
        await engine.dispose()
    assert all(count >= 7 for count in caught_up[:2]), caught_up
    assert caught_up[2:] == [0, 0, 0]
