"""`bench import`: a generated ChatGPT export and a Claude export imported by the operator's command.

For each format: the export (2,000 conversations, 100,000 messages; `--quick` 100 / 2,000) is written
as its zip into a temporary folder, and `python -m bot import` stores it into a scratch database in a
child process, whose peak RSS is read from its rusage. While it runs, this process asks full text
for the first conversation's first line until it is found. Printed: what the preview says it costs
to learn from it (model calls, tokens, dollars), messages stored per second (the run's own clock,
from its start to its end), the whole command's time, peak RSS, the time until the first message is
searchable, and the vector index catching up behind it with EMBEDDER (MiniLM by default): the
pace of the first `VECTOR_SAMPLE` messages and the time all of them would take at that pace.
`--big` writes a ChatGPT conversations.json of about 1 GB instead and reports the same.
"""

from __future__ import annotations

import asyncio
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select, text

from agent.account.imports import ImportPreview, preview_import
from agent.core.clock import Clock
from agent.core.settings import Settings
from agent.search.embedders import open_embedder
from agent.search.recall import Recall
from bench.common import scratch_database
from bench.import_data import ExportShape, Format, write_export
from db.engine import create_engine, session_factory
from db.models import ImportRun, User

SIZES = {
    "full": ExportShape(conversations=2000, messages_per_conversation=50),
    "quick": ExportShape(conversations=100, messages_per_conversation=20),
    # About 1 GB of ChatGPT JSON: long lines, so the file is big for the rows it makes.
    "big": ExportShape(conversations=4000, messages_per_conversation=100, words=360),
}
# Messages embedded to measure the vector index's pace (fewer with --quick).
VECTOR_SAMPLE = 2000
QUICK_VECTOR_SAMPLE = 100
TELEGRAM_ID = 777


@dataclass(frozen=True)
class ImportFigures:
    """What one import measured."""

    preview: ImportPreview
    file_bytes: int
    stored_per_second: float
    command_seconds: float
    command_cpu_seconds: float
    peak_rss_mb: float
    first_searchable_seconds: float | None
    storing_began_seconds: float


@dataclass
class _Watch:
    """What watching the child saw: when `word` was first found, and its peak RSS (kB) so far."""

    first: float | None = None
    peak_kb: int = 0


def _peak_kb(pid: int) -> int:
    # VmHWM: the process's own high-water mark since its exec (ru_maxrss would count the forked
    # parent's pages from before the exec too).
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


async def _watch(url: str, word: str, started: float, child: subprocess.Popen[str]) -> _Watch:
    """Ask full text for `word` and read the child's peak RSS until the child ends."""
    engine = create_engine(url, pool_size=1)
    query = (
        "SELECT count(*) FROM transcript_fts WHERE transcript_fts MATCH :word"
        if engine.dialect.name == "sqlite"
        else "SELECT count(*) FROM transcript_messages WHERE search_tsv @@ plainto_tsquery('simple', :word)"
    )
    seen = _Watch()
    try:
        while _running(child.pid):
            seen.peak_kb = max(seen.peak_kb, _peak_kb(child.pid))
            if seen.first is None:
                async with engine.connect() as connection:
                    if (await connection.execute(text(query), {"word": word})).scalar():
                        seen.first = time.perf_counter() - started
            await asyncio.sleep(0.02)
        return seen
    finally:
        await engine.dispose()


def _running(pid: int) -> bool:
    """Whether the child still runs, asked without reaping it (its rusage is read when it is)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None


def _wait(child: subprocess.Popen[str]) -> tuple[int, float]:
    """The child's exit status and the CPU seconds it used (user and system, all its threads)."""
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return child.returncode, usage.ru_utime + usage.ru_stime


async def import_once(url: str, path: Path, size: int, settings: Settings) -> ImportFigures:
    """Preview the file here, then import it with `python -m bot import` in a child process."""
    engine = create_engine(url)
    sessions = session_factory(engine)
    try:
        preview = await preview_import(sessions, 0, path, timezone="UTC", settings=settings)
        env = {**os.environ, "DATABASE_URL": url, "LOG_LEVEL": "WARNING"}
        started = time.perf_counter()
        child = await asyncio.to_thread(
            subprocess.Popen,
            [sys.executable, "-m", "bot", "import", str(path), "--user", str(TELEGRAM_ID)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        wall = Clock().now()
        seen = await _watch(url, "c0m0", started, child)
        status, cpu = await asyncio.to_thread(_wait, child)
        command_seconds = time.perf_counter() - started
        if status != 0:
            raise RuntimeError(f"the import command failed ({status})")
        async with sessions() as session:
            run = (await session.execute(select(ImportRun))).scalar_one()
        assert run.finished_at is not None
        storing = (run.finished_at - run.created_at) / timedelta(seconds=1)
        return ImportFigures(
            preview=preview,
            file_bytes=size,
            stored_per_second=run.messages_stored / storing if storing else 0.0,
            command_seconds=command_seconds,
            command_cpu_seconds=cpu,
            peak_rss_mb=seen.peak_kb / 1024,
            first_searchable_seconds=seen.first,
            storing_began_seconds=(run.created_at - wall) / timedelta(seconds=1),
        )
    finally:
        await engine.dispose()


async def vector_pace(url: str, settings: Settings, *, sample: int) -> tuple[int, float] | None:
    """Messages embedded and seconds taken by the search index's own passes, up to `sample` messages."""
    embedder = await open_embedder(settings)
    if embedder is None:
        return None
    engine = create_engine(url)
    sessions = session_factory(engine)
    try:
        recall = Recall(settings=settings, sessions=sessions, dialect=engine.dialect.name, embedder=embedder)
        async with sessions() as session:
            user_id = (await session.execute(select(User.id))).scalar_one()
        done, started = 0, time.perf_counter()
        while done < sample:
            stats = await recall.index_user(user_id, now=Clock().now(), limit=min(1000, sample - done))
            done += stats.messages
            if not stats.more:
                break
        return done, time.perf_counter() - started
    finally:
        await engine.dispose()


def _line(kind: Format, figures: ImportFigures, vectors: tuple[int, float] | None, embedder: str) -> str:
    preview = figures.preview
    first = figures.first_searchable_seconds
    lines = [
        f"{preview.assistant}: {preview.conversations:,} conversations, {preview.messages:,} messages, "
        f"{figures.file_bytes / 1e6:,.1f} MB file ({kind})",
        f"  stored and searchable by full text: {figures.stored_per_second:,.0f} messages/s "
        f"(the whole command {figures.command_seconds:.1f} s, {figures.command_cpu_seconds:.1f} s of CPU: "
        "reading the file twice, hashing it, storing)",
        f"  peak RSS of the import process: {figures.peak_rss_mb:.0f} MB",
        f"  first message searchable {first - figures.storing_began_seconds:.2f} s after storing began "
        f"({first:.1f} s after the command started: start-up, the preview's pass over the file)"
        if first is not None
        else "  first message: not seen searchable while the command ran",
        f"  learning from it: {preview.model_calls:,} model calls (extraction per conversation, a summary "
        f"per day over {preview.days:,} days), {preview.input_tokens:,} input tokens"
        + (f", about ${preview.dollars:.2f}" if preview.dollars is not None else ""),
    ]
    if vectors is not None and vectors[0]:
        count, seconds = vectors
        pace = count / seconds
        lines.append(
            f"  vectors ({embedder}): {count:,} messages in {seconds:.1f} s = {pace:,.0f} messages/s; all "
            f"{preview.messages:,} in about {preview.messages / pace / 60:.1f} min, in the background"
        )
    return "\n".join(lines)


async def run_import_bench(
    settings: Settings, *, quick: bool = False, big: bool = False, backend: str = "sqlite"
) -> None:
    """Print the import figures for both formats (or the big ChatGPT file)."""
    shape = SIZES["big" if big else "quick" if quick else "full"]
    kinds: list[Format] = ["chatgpt"] if big else ["chatgpt", "claude"]
    sample = QUICK_VECTOR_SAMPLE if quick else VECTOR_SAMPLE
    print(f"bench import ({backend}; {os.cpu_count()} cores; EMBEDDER={settings.embedder})")
    with tempfile.TemporaryDirectory() as folder:
        for kind in kinds:
            path = Path(folder) / ("conversations.json" if big else f"{kind}-export.zip")
            write_export(path, kind, shape, zipped=not big)
            async with scratch_database(backend) as url:
                if url is None:
                    print(f"  {backend}: PostgreSQL unreachable, skipped")
                    return
                figures = await import_once(url, path, path.stat().st_size, settings)
                vectors = None if big else await vector_pace(url, settings, sample=sample)
            print(_line(kind, figures, vectors, settings.embedder), flush=True)
            path.unlink()
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this process, which generated the files and previewed them: peak RSS {own:.0f} MB)")
