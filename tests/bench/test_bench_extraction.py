"""`bench extraction` runs the real post-processing over generated conversations with a careless
extractor: what it counts as kept, duplicated and resolved is what the job stored."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from agent.core.settings import Settings
from bench.extraction import report, run_once


async def test_the_extraction_benchmark_counts_what_post_processing_kept(
    database_url: str, engine: AsyncEngine
) -> None:
    settings = Settings(_env_file=None, summary_model="test", model="test", context_engine="v1")  # type: ignore[call-arg]

    figures = await run_once(settings, 1, url=database_url)

    (bad, bads), (good, goods) = figures.bad, figures.good
    assert (bad, bads) == (0, 20) and (good, goods) == (10, 10)
    resolved, moves = figures.resolved
    assert moves == 5 and resolved > 0
    assert figures.overhead and max(figures.overhead) <= 0.15
    assert len(report(figures)) == 5
