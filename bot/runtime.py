"""The composition root: settings in, a wired engine, session factory and turn service out.

What a start needs before it can answer is wired here and nothing more: the start-up work (the
knowledge graph's opening, the embedding model, the search index of the most recently active
people) runs after the process takes updates (`Runtime.start_up`), one step at a time, each in a
pause between turns.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

from pydantic_ai.models import Model
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.forget import ForgetResult, UserDataStore, forget_user
from agent.account.writers import WriteGuard
from agent.chat.documents import DocumentParser
from agent.chat.persona import persona_for
from agent.context.builder import ContextBuilder
from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.graph import KnowledgeGraph, NullGraph
from agent.graph.guarded import GuardedGraph
from agent.graph.opening import OpeningGraph
from agent.graph.setup import settings_graph_opener
from agent.graph.store import GraphDataStore
from agent.history.messages import TextCaches
from agent.memory.graph import GraphFacts
from agent.memory.service import Facts
from agent.memory.units import FactUnits
from agent.search.embedders import open_embedder
from agent.search.embeddings import Embedder
from agent.search.recall import Recall
from agent.search.recall_index import Pause
from agent.turn.service import TurnService
from bot.importing import ImportRunner
from db.engine import create_engine, session_factory
from db.migrate import upgrade_to_head_async
from jobs.context import JobContext, build_job_context

logger = logging.getLogger(__name__)

# A step of the start-up work waits at most this long for a pause between turns, then runs anyway
# (off the event loop): a process busy from its first second still gets its graph and index.
STARTUP_PATIENCE_SECONDS = 10.0


@dataclass
class Runtime:
    """Everything a surface (Telegram, terminal, jobs) needs, built once."""

    settings: Settings
    engine: AsyncEngine
    sessions: async_sessionmaker[AsyncSession]
    clock: Clock
    turns: TurnService
    # Background jobs (post-processing, day summaries): the scheduler and POST /tasks/<name> use it.
    jobs: JobContext
    # PDFs are parsed in child processes under a deadline and a memory ceiling, a few at a time.
    documents: DocumentParser
    # Stores outside the core tables (search index, knowledge graph): /export and /forget cover them.
    data_stores: list[UserDataStore] = field(default_factory=list)
    # Conversation search and get: the recall tools and `reindex` use it.
    recall: Recall | None = None
    # The person's facts (the one list, the graph's relation facts joined): the memory tools, the
    # facts found for each message, /memory and the Mini App use it.
    facts: Facts | None = None
    # The knowledge graph: NullGraph when GRAPH_BACKEND=none or it could not open.
    graph: KnowledgeGraph = field(default_factory=NullGraph)
    # Writers /forget waits for; every graph write and indexing pass registers here.
    guard: WriteGuard | None = None
    # Imports of another assistant's export storing in the background of this process (bot/importing.py).
    imports: ImportRunner = field(default_factory=ImportRunner)
    _closed: bool = field(default=False, init=False, repr=False)
    _startup: asyncio.Task[None] | None = field(default=None, init=False, repr=False)

    async def warm_up(self, *, pause: Pause | None = None) -> None:
        """The start-up work: open the knowledge graph, load the embedding model, catch up the search
        index of the most recently active people and load their vectors; `await pause()` before
        each step. Without the pauses (the terminal chat), all of it at once."""
        started = time.perf_counter()
        if isinstance(self.graph, OpeningGraph):
            if pause is not None:
                await pause()
            await self.graph.opened()
        if self.recall is not None:
            await self.recall.warm_up(now=self.clock.now(), pause=pause)
        logger.info("start-up work done", extra={"ms": round((time.perf_counter() - started) * 1000)})

    def start_up(self, caught_up: Callable[[], Awaitable[object]] | None = None) -> None:
        """Run `warm_up` in the background, each step in a pause between turns, the first one also
        after `await caught_up()` (the updates waiting at start are worked); both within
        STARTUP_PATIENCE_SECONDS, so start-up work is never starved."""
        activity = self.turns.frame.activity
        activity.touch()
        first = True

        async def pause() -> None:
            nonlocal first
            deadline = time.monotonic() + STARTUP_PATIENCE_SECONDS
            if first and caught_up is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(caught_up(), STARTUP_PATIENCE_SECONDS)
            first = False
            await activity.quiet(at_most=max(0.0, deadline - time.monotonic()))

        async def work() -> None:
            try:
                await self.warm_up(pause=pause)
            except Exception:
                # The task's top: a reply never depends on it, so it is logged and the process serves on.
                logger.exception("start-up work failed")

        self._startup = asyncio.create_task(work(), name="start-up work")

    async def forget(self, user_id: int) -> ForgetResult:
        """/forget: the user's rows, then (after their writers in flight) every store and cache."""
        return await forget_user(
            self.sessions,
            user_id,
            self.data_stores,
            guard=self.guard,
            caches=self.jobs.caches,
            now=self.clock.now(),
        )

    async def settle(self) -> None:
        """Wait for background work the replies did not wait for (indexing)."""
        await self.turns.settle()
        if self.recall is not None:
            await self.recall.settle()

    async def close(self) -> None:
        """Release connections (and stop an embedded graph's server); a second call does nothing."""
        if self._closed:
            return
        self._closed = True
        # Each step runs even when an earlier one fails: the graph's server must never outlive us.
        if self._startup is not None:
            self._startup.cancel()  # an opening graph is closed (or awaited) by its own close below
            await asyncio.gather(self._startup, return_exceptions=True)
        async with contextlib.AsyncExitStack() as steps:
            steps.push_async_callback(self.engine.dispose)
            if self.guard is not None:
                steps.push_async_callback(self.guard.close)
            steps.push_async_callback(self.graph.close)
            steps.push_async_callback(self.turns.close)
            steps.push_async_callback(self.documents.close)
            if self.recall is not None:
                self.recall.stop()  # a long catch-up (an imported history) resumes at the next start
            steps.push_async_callback(self.imports.close)  # first: a run's writes end before the engine
            await self.settle()


async def build_runtime(
    settings: Settings,
    *,
    clock: Clock | None = None,
    model: Model | str | None = None,
    migrate: bool = True,
    summary_model: Model | str | None = None,
    embedder: Embedder | Literal["settings"] | None = "settings",
    graph: KnowledgeGraph | Literal["settings"] = "settings",
) -> Runtime:
    """Upgrade the schema to head and wire the services; `graph=` lets tests pass their own graph.

    The graph GRAPH_BACKEND names is opened later, by `start_up` or `warm_up` (or at its first write).
    """
    persona_for(settings)  # PERSONA_FILE is read now: a missing or empty file stops the start
    if migrate:
        await upgrade_to_head_async(settings.database_url)
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    clock = clock or Clock()
    # One embedder per process (loaded on first use); `embedder=` lets tests pass a stand-in.
    chosen = await open_embedder(settings) if embedder == "settings" else embedder
    guard = WriteGuard(sessions, engine=engine)
    # The person's facts rank in conversation_search too (each points at the messages it comes from).
    units = FactUnits.from_settings(settings)
    recall = Recall(
        settings=settings,
        sessions=sessions,
        dialect=engine.dialect.name,
        embedder=chosen,
        guard=guard,
        units=units,
    )
    # The graph shares the one embedder; off, the facts are the list alone.
    knowledge_graph = graph if graph != "settings" else _settings_graph(settings, chosen, clock)
    graph_on = not isinstance(knowledge_graph, NullGraph)
    try:
        enrichment = (
            GraphFacts(
                GuardedGraph(knowledge_graph, guard),
                clock=clock,
                timeout_seconds=settings.graph_search_timeout_seconds,
                sessions=sessions,
                # The graph opened from the settings shares the one embedder: recall embeds once.
                embedder=chosen if graph == "settings" else None,
            )
            if graph_on
            else None
        )
        facts = Facts(settings, recall, units=units, graph=enrichment)
        turns = TurnService(
            settings=settings,
            engine=engine,
            sessions=sessions,
            clock=clock,
            model=model,
            recall=recall,
            facts=facts,
            context_builder=ContextBuilder(settings, facts=facts),
        )
        jobs = build_job_context(
            settings,
            engine,
            sessions,
            clock=clock,
            summary_model=summary_model,
            graph=knowledge_graph if graph_on else None,
            guard=guard,
            chat_model=model,
        )
    except BaseException:
        await knowledge_graph.close()  # an embedded graph runs a server process: never leave it behind
        await engine.dispose()
        raise
    data_stores: list[UserDataStore] = [
        recall,
        *([GraphDataStore(knowledge_graph)] if graph_on else []),
    ]
    # The `forget` job finishes what a failing store left of a /forget (the same stores and caches).
    jobs.data_stores = data_stores
    jobs.caches = [
        turns.histories,
        TextCaches(turns.counter),
        turns.context_builder.briefings,
        turns.context_builder.profiles,
    ]
    return Runtime(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        turns=turns,
        jobs=jobs,
        documents=DocumentParser.from_settings(settings),
        data_stores=data_stores,
        recall=recall,
        facts=facts,
        graph=knowledge_graph,
        guard=guard,
    )


def _settings_graph(settings: Settings, embedder: Embedder | None, clock: Clock) -> KnowledgeGraph:
    """The graph the settings name, opening in the background; `NullGraph` when it is off."""
    opener = settings_graph_opener(settings, embedder=embedder, clock=clock)
    return NullGraph() if opener is None else OpeningGraph(opener)
