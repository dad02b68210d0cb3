"""150 distinct users through the turn service: every per-user cache and lock map stays within its
bound (entries and bytes), and what the service holds stops growing once the caches are full. Real
database (SQLite: the caches and maps are the same objects on either database), the local hashing
embedder (so indexing passes and vector searches run), the chat model a FunctionModel.

150 users overflow the largest entry bound (45 indexed users) more than three times and the others
7 to 50 times. NIKITA_MANY_USERS=10000 runs the long version.

Memory is measured as the bytes of every object reachable from the service (deterministic, and
it is where a per-user map would grow), with the process's peak RSS printed alongside; tracemalloc
would triple the run time on the 2-core machines this runs on."""

from __future__ import annotations

import asyncio
import gc
import os
import resource
import sys
from datetime import timedelta
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, MethodType, ModuleType

import pytest
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from agent.account.writers import WriteGuard
from agent.core.settings import Settings
from agent.search.recall import Recall
from agent.turn.service import TurnService
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.fakes.hashing_embedder import HashingEmbedder
from db.models import User

USERS = int(os.environ.get("NIKITA_MANY_USERS", "150"))
CHECKPOINTS = 10
AT_ONCE = 8
# The bounds under test, small so that USERS overflow every one of them several times.
BOUNDS = {
    "history_cache_conversations": 20,
    "history_cache_max_bytes": 20_000,
    "search_vector_cache_users": 3,
    "search_vector_cache_bytes": 4_000,
    "search_indexed_users": 45,
}
# Once the caches are full, what the service holds may still move a little (the token counter's
# cache fills and clears, SQLAlchemy's statement cache fills up to its own bound: about 100 KB).
# An unbounded history cache alone would add ~3.75 KB a user, ~450 KB for the last 120 users; this
# limit catches any per-user map of more than 2.5 KB an entry (500 bytes for 10,000 users).
GROWTH_LIMIT = max(300_000, USERS * 400)


def chat(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """The chat model: a short friendly answer."""
    return ModelResponse(parts=[TextPart(f"Nice to meet you! {'la ' * 40}")])


def reachable_bytes(*roots: object) -> int:
    """Bytes of every object reachable from `roots` (modules, classes and functions left out)."""
    skip = (ModuleType, FunctionType, BuiltinFunctionType, MethodType, type, CodeType, FrameType)
    seen: set[int] = set()
    stack = list(roots)
    total = 0
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, skip):
            continue
        seen.add(id(obj))
        total += sys.getsizeof(obj, 0)
        stack.extend(gc.get_referents(obj))
    return total


@pytest.mark.slow
async def test_many_users_leave_every_map_bounded(
    database_url: str, engine: AsyncEngine, sessions: async_sessionmaker[AsyncSession], clock: FrozenClock
) -> None:
    settings = Settings(
        _env_file=None,
        database_url=database_url,
        model="test",
        compaction_enabled=False,
        **BOUNDS,  # type: ignore[arg-type]
    )
    guard = WriteGuard(sessions)
    recall = Recall(
        settings=settings,
        sessions=sessions,
        dialect=engine.dialect.name,
        embedder=HashingEmbedder(),
        guard=guard,
    )
    service = TurnService(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=clock,
        model=FunctionModel(chat),
        recall=recall,
    )
    slots = asyncio.Semaphore(AT_ONCE)
    start = clock.now()
    # The users exist already (one insert): the turns are what is measured.
    async with sessions() as session, session.begin():
        session.add_all(
            User(
                key=f"cli:user{n}", timezone="UTC", onboarding_status="complete", profile={}, created_at=start
            )
            for n in range(USERS)
        )
    async with sessions() as session:
        ids = list((await session.execute(select(User.id).order_by(User.id))).scalars())

    async def one(n: int) -> None:
        async with slots:
            at = start + timedelta(seconds=n)
            await service.reply(
                Incoming(owner=ids[n], text=f"I grow tomatoes in my garden, says user {n}", sent_at=at)
            )
            if n % 10 == 0:  # a conversation_search, as the tool runs it: fills the vector cache
                await recall.search(ids[n], "tomatoes garden", now=at + timedelta(seconds=1))

    sizes: list[dict[str, int]] = []
    held: list[int] = []
    peak_rss: list[int] = []
    step = max(USERS // CHECKPOINTS, 1)
    try:
        for first in range(0, USERS, step):
            await asyncio.gather(*(one(n) for n in range(first, min(first + step, USERS))))
            await service.settle()
            gc.collect()
            held.append(reachable_bytes(service, recall, guard))
            peak_rss.append(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
            sizes.append(
                {
                    "histories": len(service.histories),
                    "history_bytes": service.histories.bytes,
                    "turn_queues": len(service.queue),
                    "background_tasks": len(service.kit.background.tasks),
                    "writers": len(guard),
                    **recall.cache_sizes(),
                }
            )
    finally:
        await service.close()

    print(f"\nmaps per checkpoint: {sizes}\nheld bytes: {held}\npeak RSS: {peak_rss}")
    for seen in sizes:
        assert seen["histories"] <= BOUNDS["history_cache_conversations"]
        assert seen["history_bytes"] <= BOUNDS["history_cache_max_bytes"]
        assert seen["vector_users"] <= BOUNDS["search_vector_cache_users"]
        assert seen["fact_word_users"] <= BOUNDS["search_vector_cache_users"]
        assert seen["vector_bytes"] <= BOUNDS["search_vector_cache_bytes"]
        assert seen["indexed_users"] <= BOUNDS["search_indexed_users"]
        # Locks and in-flight registries hold nobody once every turn is done.
        assert seen["turn_queues"] == seen["index_locks"] == seen["vector_locks"] == 0
        assert seen["writers"] == seen["background_tasks"] == 0
    # The caches were really used, to their bounds.
    last = sizes[-1]
    assert last["indexed_users"] == BOUNDS["search_indexed_users"]
    assert last["histories"] > 0 and last["vector_users"] > 0
    # From the second checkpoint on (caches full), what the service holds stays flat.
    assert max(held[1:]) - held[1] < GROWTH_LIMIT, held
