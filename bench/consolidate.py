"""`python -m bot bench consolidate`: tidying facts, its model calls and its own time per owner.

On a scratch SQLite and PostgreSQL database: owners with 50 facts each made from everyday
templates ("Person7's sister Eva lives in Porto"), every tenth said again about "the user" (a
near duplicate), are consolidated by the real job. It times the job per owner without a model
(SUMMARY_MODEL without its key: the model-free merges alone), then changes a fifth of the owners
and counts the model calls of a run with an instant model per changed and per unchanged owner
(and its time per owner, PydanticAI's run included), and times one owner with 2,000 facts.
"""

from __future__ import annotations

import logging
import re
import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from sqlalchemy import insert

from agent.core.clock import Clock
from agent.core.errors import MissingModelKeyError
from agent.core.models import unavailable_model
from agent.core.settings import Settings
from agent.core.tokens import get_counter
from bench.common import scratch_database
from db.engine import create_engine, session_factory
from db.models import FactConsolidation, User, UserFact
from db.repositories.dedupe import fact_dedupe_key
from db.repositories.facts import FactRepository
from jobs.context import JobContext
from jobs.registry import run_job

START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)


_TEMPLATES = (
    "{who} plays the {thing} on {day}s",
    "{who}'s {person} {name} lives in {city}",
    "{who} likes {food} and dislikes {other}",
    "{who} works as a {job} near {city}",
    "{who} has a {pet} called {name}",
    "{who} is learning {language} for a trip to {city}",
    "{who} wants to visit {city} with {name}",
    "{who} does not eat {food}",
)
_WORDS = {
    "thing": "cello piano guitar violin drums flute chess tennis football trumpet".split(),
    "day": "Monday Tuesday Wednesday Thursday Friday Saturday Sunday".split(),
    "person": "sister brother mother father friend colleague cousin neighbour aunt uncle".split(),
    "name": "Eva Tom Mia Leo Noor Sam Ines Hugo Lena Omar Rita Yuki".split(),
    "city": "Lisbon Porto Oslo Lyon Berlin Madrid Rome Vienna Prague Dublin Seoul Lima Quito".split(),
    "food": "olives mushrooms sushi curry tofu cheese chocolate pasta lentils figs".split(),
    "other": "coffee garlic onions beer cilantro liquorice".split(),
    "job": "nurse teacher engineer baker pilot lawyer designer farmer".split(),
    "pet": "cat dog parrot rabbit turtle hamster".split(),
    "language": "Spanish Japanese Arabic Finnish Greek Korean Dutch".split(),
}


def _facts(owner: int, count: int) -> list[str]:
    """`count` different facts about one owner, and every tenth said again about "the user"."""
    facts: list[str] = []
    seen: set[str] = set()
    n = 0
    while len(facts) < count:
        template = _TEMPLATES[n % len(_TEMPLATES)]
        fill = {
            key: words[(n * (i + 3) + n // len(words)) % len(words)]
            for i, (key, words) in enumerate(_WORDS.items())
        }
        fact = template.format(who=f"Person{owner}", **fill)
        n += 1
        if fact not in seen:
            seen.add(fact)
            facts.append(fact)
    return facts + [f.replace(f"Person{owner}", "The user", 1) + "." for f in facts[::10]]


async def _seed(url: str, owners: Sequence[tuple[int, int]]) -> None:
    """(owner id, fact count) owners, their facts and their "changed" consolidation rows."""
    engine = create_engine(url)
    async with engine.begin() as conn:
        await conn.execute(
            insert(User),
            [
                {
                    "id": o,
                    "key": f"bench:{o}",
                    "name": f"Person{o}",
                    "timezone": "UTC",
                    "profile": {},
                    "created_at": START,
                }
                for o, _ in owners
            ],
        )
        rows: list[dict[str, Any]] = []
        for owner, count in owners:
            for n, content in enumerate(_facts(owner, count)):
                at = START + timedelta(minutes=n)
                rows.append(
                    {
                        "user_id": owner,
                        "content": content,
                        "source": "extraction",
                        "message_ids": [],
                        "dedupe_key": fact_dedupe_key(content),
                        "created_at": at,
                        "last_seen_at": at,
                    }
                )
        for start in range(0, len(rows), 5_000):
            await conn.execute(insert(UserFact), rows[start : start + 5_000])
        await conn.execute(
            insert(FactConsolidation),
            [{"user_id": o, "changed_at": START, "graph_changed_at": START} for o, _ in owners],
        )
        if engine.dialect.name == "postgresql":
            await conn.exec_driver_sql(
                "SELECT setval(pg_get_serial_sequence('users', 'id'), (SELECT max(id) FROM users))"
            )
    await engine.dispose()


class _Counted:
    """An instant consolidation model that answers "nothing to change" and counts its calls per owner."""

    def __init__(self) -> None:
        self.calls: Counter[int] = Counter()

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        prompt = " ".join(str(p.content) for m in messages for p in m.parts if isinstance(p, UserPromptPart))
        self.calls.update({int(n) for n in re.findall(r"\bPerson(\d+)\b", prompt)})
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {})])


async def _run(settings: Settings, url: str, model: Any) -> tuple[dict[str, Any], float]:
    engine = create_engine(url)
    sessions = session_factory(engine)
    ctx = JobContext(
        settings=settings,
        engine=engine,
        sessions=sessions,
        clock=Clock(),
        summary_model=model,
        worker_id="bench",
    )
    try:
        started = time.perf_counter()
        counts = await run_job("consolidate", ctx)
        return counts, time.perf_counter() - started
    finally:
        await engine.dispose()


async def _change(url: str, owners: Sequence[int]) -> None:
    engine = create_engine(url)
    async with session_factory(engine)() as session, session.begin():
        facts = FactRepository(session)
        for owner in owners:
            said = [(f"Person{owner} started a new hobby", ())]
            await facts.add_sourced(owner, None, said, datetime.now(UTC), source="tool")
    await engine.dispose()


def _per_owner(seconds: float, counts: dict[str, Any]) -> str:
    return f"{seconds / max(1, counts['consolidated']) * 1000:.1f} ms per owner"


async def bench_backend(settings: Settings, backend: str, owners: int) -> list[str]:
    """The printed lines of one database."""
    no_key = unavailable_model(
        MissingModelKeyError("SUMMARY_MODEL needs a key (the benchmark runs without one)")
    )
    lines: list[str] = []
    async with scratch_database(backend) as url:
        if url is None:
            return [f"  {backend:8}: PostgreSQL unreachable, skipped"]
        await _seed(url, [(o, 50) for o in range(1, owners + 1)])
        counts, seconds = await _run(settings, url, no_key)
        lines.append(
            f"  {backend:8} without a model: {counts['consolidated']} owners of 50 facts in {seconds:.2f} s,"
            f" {_per_owner(seconds, counts)}; {counts['merged']} merged"
        )
        changed = set(range(1, owners + 1, 5))
        await _change(url, sorted(changed))
        model = _Counted()
        counts, seconds = await _run(settings, url, FunctionModel(model))
        on_changed = sum(n for owner, n in model.calls.items() if owner in changed)
        on_unchanged = sum(n for owner, n in model.calls.items() if owner not in changed)
        unchanged = owners - len(changed)
        lines.append(
            f"  {backend:8} instant model, {len(changed)} of {owners} owners changed: model calls"
            f" {on_changed / len(changed):.2f} per changed owner, {on_unchanged / unchanged:.2f} per"
            f" unchanged; {_per_owner(seconds, counts)}"
        )
    async with scratch_database(backend) as url:
        assert url is not None
        await _seed(url, [(1, 2_000)])
        counts, seconds = await _run(settings, url, no_key)
        lines.append(
            f"  {backend:8} one owner of 2,000 facts without a model: {seconds * 1000:.0f} ms,"
            f" {counts['merged']} merged"
        )
    return lines


async def run_consolidate_bench(settings: Settings, *, quick: bool = False) -> None:
    """Print the model calls per owner and the job's time per owner on both databases."""
    owners = 50 if quick else 200
    # One line per owner is the job's log, not the figures; the token counter is loaded once per
    # process (the bot has it from its first turn), not in the first owner's time.
    logging.getLogger("jobs").setLevel(max(logging.WARNING, logging.getLogger().level))
    get_counter().count("warm")
    print(f"consolidation ({owners} owners of 50 facts; then a fifth of them changed)")
    for backend in ("sqlite", "postgres"):
        for line in await bench_backend(settings, backend, owners):
            print(line, flush=True)
