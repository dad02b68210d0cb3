"""What every job needs, built once at the entry point (bot process, CLI, benchmark, tests)."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from typing import Any

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.agent import build_model
from agent.clock import Clock
from agent.settings import Settings


@dataclass
class JobContext:
    """Settings, database, clock and the summary model of the background jobs."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    summary_model: Model | str
    worker_id: str
    # The knowledge-graph hook (agent/graph's GraphMemory); None turns the graph stage off.
    graph: Any = None


def default_worker_id() -> str:
    """host:pid, so a claim names the process that holds it."""
    return f"{socket.gethostname()}:{os.getpid()}"


def build_job_context(
    settings: Settings,
    engine: AsyncEngine,
    sessions: async_sessionmaker[AsyncSession],
    *,
    clock: Clock | None = None,
    summary_model: Model | str | None = None,
    graph: Any = None,
) -> JobContext:
    """A JobContext with the SUMMARY_MODEL built from settings unless one is given."""
    model = summary_model if summary_model is not None else build_model(settings.summary_model, settings)
    return JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock or Clock(),
        summary_model=model,
        worker_id=default_worker_id(),
        graph=graph,
    )
