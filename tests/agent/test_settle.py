"""Waiting for background work returns even when that work finished a moment ago.

Background tasks leave their set in done callbacks the event loop runs later. A gather of tasks
that are all done returns without yielding, so a `while tasks: await gather(...)` loop called in
that window never let the loop run the callbacks and spun forever (seen as a hung shutdown).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

from agent.core.settings import Settings
from agent.turn.service import TurnService
from db.engine import create_engine, session_factory


def returns_within(seconds: float, scenario: Callable[[], Awaitable[None]]) -> bool:
    """Run the scenario on its own loop in a thread: a spinning loop cannot be timed out from inside."""
    finished = threading.Event()

    def run() -> None:
        asyncio.run(scenario())
        finished.set()

    threading.Thread(target=run, daemon=True).start()
    return finished.wait(seconds)


async def just_finished(tasks: set[asyncio.Task[None]]) -> asyncio.Task[None]:
    """A task in `tasks` that has finished while its done callback still waits in the loop's queue."""

    async def work() -> None:
        return None

    task = asyncio.create_task(work())
    tasks.add(task)
    task.add_done_callback(tasks.discard)
    await asyncio.sleep(0)
    assert task.done() and task in tasks
    return task


def test_turn_service_settle_after_a_task_just_finished(tmp_path: Path) -> None:
    async def scenario() -> None:
        url = f"sqlite+aiosqlite:///{tmp_path / 'n.db'}"
        engine = create_engine(url)
        settings = Settings(_env_file=None, database_url=url, model="test", summary_model="test")  # type: ignore[call-arg]
        service = TurnService(
            settings=settings, engine=engine, sessions=session_factory(engine), model="test"
        )
        await just_finished(service.kit.background.tasks)  # type: ignore[arg-type]
        await service.settle()
        await service.close()
        await engine.dispose()

    assert returns_within(10, scenario)
