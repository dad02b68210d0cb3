"""`python -m bot bench storage`: bytes at rest per stored message, by table and index, on both
databases, as a history grows and the retention job runs.

The history: people talk with the offline demo models, three messages a day each, a conversation a
day, through the real runtime (turns, post-processing, day summaries, nightly finalisation, the
default embedder indexing every turn). With `turns` every person does; otherwise (the default) three
people do on a scratch SQLite database and `bench.storage_gen` writes their rows again, in bulk, for
as many people as asked (minutes for 100 x 90 days, where real turns take hours). The figure is the
database's size (SQLite: dbstat's pages of each table and index; PostgreSQL: each table's heap and
TOAST, and each index) divided by the transcript messages, less the empty schema's, compacted
(VACUUM on SQLite, VACUUM FULL on PostgreSQL: the space a running database reuses); measured at each
third of the history, before and after the `retention` job (run on a copy, as the bot's first run
after a start runs it), with what each message since the last third added once retention ran (flat
over time: the retention period's snapshots and a slim one per conversation). Default 3 people x 40
days with SNAPSHOT_RETENTION_DAYS=10 (the later thirds are past the retention period), `--quick`
2 x 12 with 3, `--full` 100 x 90 with the default 30.
"""

from __future__ import annotations

import hashlib
import pickle
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from sqlalchemy import text

from agent.account.users import get_or_create_user
from agent.core.settings import Settings
from agent.graph import NullGraph
from agent.turn.transcript import Incoming
from bench.clock import FrozenClock
from bench.common import database_copy, scratch_database
from bench.storage_gen import Template, Words, read_template, replay
from bot.runtime import build_runtime
from db.engine import create_engine
from jobs.registry import run_job

START = datetime(2026, 1, 5, 7, 0, tzinfo=UTC)
# What people say, in turn: about as long as a chat message is (40 to 200 characters).
SAID = (
    "Morning! Slept badly again, the neighbours had a party until two.",
    "I went to the market with my sister Maya and we bought tomatoes for the garden. "
    "Then the early shift at the hospital, and now I am tired. What should I cook tonight?",
    "My interview is on Thursday, I am nervous about it.",
    "We watched a slow film tonight, Maya loved it more than I did.",
    "Cycled along the river after work, the weather was finally kind.",
    "Do you remember what I said about the new flat last week?",
)

# The people whose real turns the generator writes again (each says the sentences in another order).
RECORDED = 3

_PG_SIZES = """
SELECT c.relname, CASE WHEN c.relkind = 'i' THEN pg_relation_size(c.oid)
       ELSE pg_table_size(c.oid) END
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i')
"""


@dataclass(frozen=True)
class Sizes:
    """Bytes per table or index, and the transcript messages they hold."""

    messages: int
    parts: dict[str, int]

    @property
    def total(self) -> int:
        """Every table and index together."""
        return sum(self.parts.values())

    def per_message(self) -> float:
        """Bytes at rest per stored message."""
        return self.total / max(1, self.messages)

    def minus(self, empty: Sizes) -> Sizes:
        """What the rows add to an empty database's tables and indexes."""
        return Sizes(
            self.messages, {name: size - empty.parts.get(name, 0) for name, size in self.parts.items()}
        )


async def measure(url: str, *, compact: bool) -> Sizes:
    """The sizes of every table and index now (`compact`: after VACUUM / VACUUM FULL)."""
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            messages = int(await conn.scalar(text("SELECT count(*) FROM transcript_messages")) or 0)
            if engine.dialect.name == "postgresql":
                await conn.execute(text("VACUUM FULL" if compact else "VACUUM"))
                rows = (await conn.execute(text(_PG_SIZES))).all()
                parts = {str(name): int(size) for name, size in rows}
            else:
                if compact:
                    await conn.execute(text("VACUUM"))
                rows = (await conn.execute(text("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"))).all()
                parts = {str(name): int(size) for name, size in rows}
    finally:
        await engine.dispose()
    return Sizes(messages, parts)


async def talk(url: str, people: int, days: int, *, clock: FrozenClock, first_day: int = 0) -> None:
    """`people` x `days` of three messages a day through the real runtime, from `first_day` on."""
    settings = _settings(url)
    runtime = await build_runtime(settings, clock=clock, migrate=False, graph=NullGraph())
    try:
        users = []
        for n in range(people):
            user, _ = await get_or_create_user(
                runtime.sessions, key=f"cli:storage-{n}", now=clock.now(), timezone="UTC", name=f"P{n}"
            )
            users.append(user.id)
        for day in range(first_day, first_day + days):
            for turn in range(3):
                for n, user_id in enumerate(users):
                    said = SAID[(day * 3 + turn + n) % len(SAID)]
                    await runtime.turns.reply(
                        Incoming(owner=user_id, text=f"{said} (day {day})", sent_at=clock.now())
                    )
                clock.advance(timedelta(minutes=4))
            await runtime.turns.settle()
            clock.advance(timedelta(hours=1))
            for job in ("close-idle-conversations", "postprocess", "day-summaries"):
                await run_job(job, runtime.jobs)
            clock.advance(timedelta(hours=22, minutes=48))
            await run_job("nightly", runtime.jobs)
    finally:
        await runtime.close()


def _settings(url: str, retention_days: float = 30.0) -> Settings:
    return Settings(
        database_url=url,
        model="demo",
        summary_model="demo",
        graph_backend="none",
        snapshot_retention_days=retention_days,
        history_retention_days=retention_days,
        _env_file=None,
    )


async def retain(url: str, clock: FrozenClock, retention_days: float) -> dict[str, int]:
    """Run the `retention` job at the clock's time as the bot's first run after a start does (a sweep)."""
    runtime = await build_runtime(
        _settings(url, retention_days), clock=clock, migrate=False, embedder=None, graph=NullGraph()
    )
    try:
        return await run_job("retention", runtime.jobs, sweep=True)
    finally:
        await runtime.close()


def _table(before: Sizes, after: Sizes, empty: Sizes, top: int) -> list[str]:
    grown_before, grown_after = before.minus(empty), after.minus(empty)
    names = sorted(grown_before.parts, key=lambda name: -grown_before.parts[name])[:top]
    lines = [f"    {'table or index':44} {'before B/msg':>12} {'after B/msg':>12}"]
    for name in names:
        lines.append(
            f"    {name:44} {grown_before.parts[name] / max(1, before.messages):12.0f}"
            f" {grown_after.parts.get(name, 0) / max(1, after.messages):12.0f}"
        )
    return lines


async def _retained(url: str, clock: FrozenClock, retention_days: float) -> tuple[Sizes, dict[str, int]]:
    """The sizes of a copy of the database after the `retention` job ran on it (compacted)."""
    async with database_copy(url) as copy:
        counts = await retain(copy, clock, retention_days)
        return await measure(copy, compact=True), counts


Write = Callable[[str, int, int], Awaitable[None]]


def _recording(people: int, days: int) -> Path:
    """Where a recording is kept: named by its size and a digest of the code that writes and reads its
    rows (the product's folders, this module and the generator), so a change to any records again."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(p for folder in ("agent", "bot", "db", "jobs") for p in (root / folder).rglob("*.py")):
        digest.update(path.read_bytes())
    for module in ("storage.py", "storage_gen.py"):
        digest.update((root / "bench" / module).read_bytes())
    return (
        Path(tempfile.gettempdir())
        / "nikita-bench-storage"
        / f"{people}x{days}-{digest.hexdigest()[:16]}.pickle"
    )


async def record(people: int, days: int, *, rebuild: bool = False) -> tuple[Template, float | None]:
    """`people` x `days` of real turns on a scratch SQLite database, read back as the generator's
    template (kept in the temporary folder for the next run of the same code; `rebuild`: record
    anew); returns it and the seconds the turns took (None: a kept recording)."""
    kept = _recording(people, days)
    if kept.exists() and not rebuild:
        template: Template = pickle.loads(kept.read_bytes())
        return template, None
    async with scratch_database("sqlite") as url:
        assert url is not None
        began = time.perf_counter()
        await talk(url, people, days, clock=FrozenClock(current=START))
        took = time.perf_counter() - began
        template = await read_template(url, START, days)
    kept.parent.mkdir(parents=True, exist_ok=True)
    kept.write_bytes(pickle.dumps(template))
    return template, took


def checkpoints(days: int) -> list[int]:
    """The days at which the history is measured: its thirds."""
    return sorted({max(1, days // 3), max(1, 2 * days // 3), days})


async def _backend(url: str, write: Write, days: int, retention_days: float, top: int) -> list[str]:
    """Write the history up to each checkpoint, measuring it before and after retention there."""
    empty = await measure(url, compact=True)
    curve, done, last, previous = [], 0, None, None
    began = time.perf_counter()
    for day in checkpoints(days):
        await write(url, done, day)
        done = day
        clock = FrozenClock(current=START + timedelta(days=day))
        before = await measure(url, compact=True)
        after, counts = await _retained(url, clock, retention_days)
        added = ""
        if previous is not None:
            grown = after.minus(empty).total - previous.minus(empty).total
            each = grown / max(1, after.messages - previous.messages)
            added = f"; each message since the last added {each:,.0f} B"
        curve.append(
            f"    day {day}: {before.messages:,} messages, {before.minus(empty).per_message():,.0f} B/message"
            f" before retention, {after.minus(empty).per_message():,.0f} after{added}"
        )
        print(curve[-1], flush=True)
        previous, last = after, (before, after, counts)
    assert last is not None
    before, after, counts = last
    return [
        f"    {before.messages:,} messages; {before.minus(empty).per_message():,.0f} B/message before"
        f" retention, {after.minus(empty).per_message():,.0f} after ({counts});"
        f" {time.perf_counter() - began:,.0f} s",
        *curve,
        *_table(before, after, empty, top),
    ]


async def run_storage_bench(
    *,
    people: int = 3,
    days: int = 40,
    retention_days: float = 10.0,
    backends: tuple[str, ...] = ("sqlite", "postgres"),
    top: int = 24,
    turns: bool = False,
    rebuild: bool = False,
) -> list[str]:
    """Print (and return) the bytes at rest per message before and after retention, per backend, at
    each third of the history (`turns`: every person talks through the real runtime; otherwise one
    person's recorded turns are written again for each)."""
    how = (
        "every turn through the real runtime"
        if turns
        else "three people's real turns recorded, their rows written again for each person"
    )
    lines = [
        f"storage at rest ({people} people x {days} days, 3 messages a day, {how}; demo models, default"
        " embedder; bytes over the empty schema's, compacted;"
        f" SNAPSHOT_RETENTION_DAYS=HISTORY_RETENTION_DAYS={retention_days:g})"
    ]
    print(lines[0], flush=True)
    if turns:

        async def write(url: str, first: int, until: int) -> None:
            await talk(url, people, until - first, clock=FrozenClock(current=START + timedelta(days=first)),
                       first_day=first)  # fmt: skip
    else:
        recorded = min(people, RECORDED)
        template, took = await record(recorded, days, rebuild=rebuild)
        lines.append(
            f"  recorded {recorded} people x {days} days ({template.messages():,} messages)"
            + (f" in {took:,.0f} s" if took is not None else ", kept from an earlier run of this code")
        )
        print(lines[-1], flush=True)
        words = Words(template.said)

        async def write(url: str, first: int, until: int) -> None:
            await replay(url, template, people, until, first_day=first, words=words)

    for backend in backends:
        async with scratch_database(backend) as url:
            if url is None:
                lines.append(f"  {backend}: PostgreSQL unreachable, skipped")
                print(lines[-1], flush=True)
                continue
            print(f"  {backend}:", flush=True)
            block = await _backend(url, write, days, retention_days, top)
            lines += [f"  {backend}:", *block]
            print("\n".join(block[:1] + block[1 + len(checkpoints(days)) :]), flush=True)
    return lines
