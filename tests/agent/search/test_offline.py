"""The whole retriever (MiniLM, index, rescoring, neighbours) runs with the network unreachable."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.offline import ISOLATIONS, run_offline

pytestmark = pytest.mark.process

_SCRIPT = textwrap.dedent(
    """
    import asyncio
    from datetime import UTC, date, datetime

    from agent.search.embeddings import MiniLMEmbedder
    from agent.search.recall import Recall
    from agent.core.settings import Settings
    from db.engine import create_engine, session_factory
    from db.migrate import upgrade_to_head_async
    from tests.agent.search.corpus import add_day, add_user

    async def main() -> None:
        url = "sqlite+aiosqlite:///offline.db"
        await upgrade_to_head_async(url)
        engine = create_engine(url)
        sessions = session_factory(engine)
        recall = Recall(
            settings=Settings(_env_file=None),
            sessions=sessions,
            dialect="sqlite",
            embedder=MiniLMEmbedder(threads=1),
        )
        user = await add_user(sessions, "cli:offline")
        chat = ["We adopted a puppy!", "What is its name?", "Biscuit"]
        await add_day(sessions, user, date(2026, 1, 5), chat)
        await add_day(sessions, user, date(2026, 2, 9), ["We adopted a puppy!", "Lovely", "thanks"])
        now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
        hits = await recall.search(user, "new dog in January", now=now, limit=3)
        first = hits[0]
        assert not touched, touched
        turns = [t.text for t in (first.previous_turn, first.next_turn) if t is not None]
        print(first.day_label, "|", first.when, "|", " / ".join([first.snippet or "", *turns]))
        await engine.dispose()

    asyncio.run(main())
    """
)


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_retriever_works_offline(isolation: str, tmp_path: Path) -> None:
    # "new dog" shares no word with the puppy chat: only the embedder finds it; both days hold the same
    # words, and without "January" the newer day would win the tie.
    out = run_offline(_SCRIPT, isolation, tmp_path).strip().splitlines()[-1]
    day, when, said = out.split(" | ")
    assert (day, when) == ("2026-01-05", "Monday, 8 weeks ago")
    assert "What is its name?" in said  # the turn before the hit comes with it
