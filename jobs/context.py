"""What every job needs, built once at the entry point (bot process, CLI, benchmark, tests)."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import UserCache, UserDataStore
from agent.account.writers import WriteGuard
from agent.core.clock import Clock
from agent.core.errors import MissingModelKeyError
from agent.core.models import build_model, unavailable_model
from agent.core.settings import Settings
from agent.graph.guarded import GuardedGraph
from agent.touchpoints.messenger import TouchpointMessenger
from db.work import Retry


@dataclass
class JobContext:
    """Settings, database, clock and the summary model of the background jobs."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    summary_model: Model | str
    worker_id: str
    # The knowledge graph (agent/graph's KnowledgeGraph) the `graph` job writes; None: no graph.
    graph: Any = None
    # /forget: the writers' registry, and the stores and caches the `forget` job finishes.
    guard: WriteGuard | None = None
    data_stores: list[UserDataStore] = field(default_factory=list)
    caches: list[UserCache] = field(default_factory=list)
    # Touchpoints: the model that writes them (the chat model; None: the summary model) and the
    # bot's messenger (None where there is no Telegram: the touchpoints job then leaves them due).
    chat_model: Model | str | None = None
    messenger: TouchpointMessenger | None = None
    # How a job waits between steps of its own (the touchpoints' lease renewals), beside `clock`
    # for "now": tests step it instead of waiting in real time.
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep

    @property
    def retry(self) -> Retry:
        """The retry policy of post-processing and tidying (POSTPROCESS_MAX_ATTEMPTS, _RETRY_*)."""
        s = self.settings
        return Retry(
            s.postprocess_max_attempts, s.postprocess_retry_base_seconds, s.postprocess_retry_max_seconds
        )


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
    guard: WriteGuard | None = None,
    chat_model: Model | str | None = None,
) -> JobContext:
    """A JobContext with the SUMMARY_MODEL built from settings unless one is given.

    The graph's writes go through the `WriteGuard` (one is made when none is given), so the
    `graph` job never writes for a user /forget deleted (agent/account/writers.py).
    """
    model = summary_model if summary_model is not None else settings_model(settings, "summary_model")
    guard = guard if guard is not None else WriteGuard(sessions, engine=engine)
    if graph is not None and not isinstance(graph, GuardedGraph):
        graph = GuardedGraph(graph, guard)
    return JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock or Clock(),
        summary_model=model,
        worker_id=default_worker_id(),
        graph=graph,
        guard=guard,
        chat_model=chat_model if chat_model is not None else settings_model(settings, "model"),
    )


def settings_model(settings: Settings, setting: str) -> Model:
    """The model a setting names; without its key, one that refuses in one line when a job calls it.

    Jobs that never call a model (closing idle conversations, finishing a /forget) run without any key; an
    unknown model string still stops the start.
    """
    try:
        return build_model(getattr(settings, setting), settings, setting=setting.upper())
    except MissingModelKeyError as exc:
        return unavailable_model(exc)
