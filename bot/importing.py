"""Imports of another assistant's export as the surfaces run them: what a file looks like, what the
person is told, and the runs storing in the background of this process.

Reading, previewing and storing are agent/account/imports.py's; this module is what the Telegram
chat (bot/handlers/imports.py), the timeline's "Bring your history" page
(bot/web/timeline/imports_api.py) and the terminal chat share: a file goes to DATA_DIR/imports
(never held in memory), is sniffed, previewed, and stored by `ImportRunner` in a task of its own,
so the chat stays usable while it runs. A run a stop interrupted is taken over once its lease
lapses (bot/handlers/imports.py's `resume_imports`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
import zipfile
from collections.abc import Awaitable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import Protocol

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.imports import (
    SOURCES,
    ImportBusyError,
    ImportFileError,
    ImportPreview,
    ImportProgress,
    ImportResult,
    run_import,
)
from agent.core.clock import Clock, zone_of
from agent.core.settings import Settings

logger = logging.getLogger(__name__)

# The names an export arrives under; a .zip is always taken as one, a .json when it looks like one.
EXPORT_SUFFIXES = (".zip", ".json")
# How much of a JSON file is read to tell an export from any other JSON.
SNIFF_BYTES = 64 * 1024
# Progress is shown at most this often (Telegram limits edits; a page polls on its own).
PROGRESS_EVERY_SECONDS = 2.0
NOTHING_NEW = "I have everything in that file already: nothing new to import."
FAILED = "I couldn't finish importing that file: {reason}"
BROKE = "Something went wrong while importing; what was stored stays, and I'll carry on at my next start."


def imports_folder(data_dir: str) -> Path:
    """Where exports wait while they are previewed and stored: DATA_DIR/imports."""
    folder = Path(data_dir) / "imports"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def staging_path(data_dir: str) -> Path:
    """A new file name for an export being received (renamed to its run's once previewed)."""
    return imports_folder(data_dir) / f"incoming-{uuid.uuid4().hex}.part"


def drop_staged(data_dir: str, *, older_than: float = 600.0) -> int:
    """Delete exports a stop left half received (never previewed, so no run names them), untouched for
    `older_than` seconds (a file being received now is written to all the time); how many."""
    cutoff = time.time() - older_than
    staged = [p for p in imports_folder(data_dir).glob("incoming-*.part") if p.stat().st_mtime < cutoff]
    for path in staged:
        remove(path)
    return len(staged)


def run_path(data_dir: str, import_id: int, suffix: str) -> Path:
    """The file of run `import_id`, kept until the run is stored or cancelled."""
    return imports_folder(data_dir) / f"{import_id}{suffix}"


def file_of(data_dir: str, import_id: int) -> Path | None:
    """The kept file of run `import_id`, when it is still there."""
    for suffix in EXPORT_SUFFIXES:
        path = run_path(data_dir, import_id, suffix)
        if path.exists():
            return path
    return None


def remove(path: Path | None) -> None:
    """Delete a kept or staged export (gone already is fine)."""
    if path is not None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def keep(path: Path, data_dir: str, import_id: int) -> Path:
    """Move a previewed file to its run's name (found again by `file_of`, resumed from after a stop)."""
    kept = run_path(data_dir, import_id, suffix_of(path))
    path.replace(kept)
    return kept


def existing_file(name: str) -> Path | None:
    """The file `name` (a path the person gave, or a run's `file_ref`), when it is one."""
    path = Path(name).expanduser()
    return path if name and path.is_file() else None


def suffix_of(path: Path) -> str:
    """ ".zip" for a zip archive, ".json" for anything else (the name a person gave it aside)."""
    return ".zip" if zipfile.is_zipfile(path) else ".json"


def looks_like_export(path: Path) -> bool:
    """Whether a file may be a ChatGPT or Claude export: any zip (preview_import says what is wrong
    with one that is not), or JSON that opens as a list of conversations of either shape."""
    if zipfile.is_zipfile(path):
        return True
    with path.open("rb") as file:
        head = file.read(SNIFF_BYTES)
    body = head.removeprefix(b"\xef\xbb\xbf").lstrip()
    markers = (b'"mapping"', b'"current_node"', b'"chat_messages"')
    return body.startswith(b"[") and any(marker in head for marker in markers)


def is_export_name(file_name: str | None) -> bool:
    """Whether a document's name is one an export arrives under."""
    return PurePosixPath(file_name or "").suffix.lower() in EXPORT_SUFFIXES


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n:,} {one if n == 1 else (many or one + 's')}"


def _day(at: datetime | None, timezone: str) -> str:
    if at is None:
        return "an unknown day"
    local = at.astimezone(zone_of(timezone))
    return f"{local.day} {local:%B %Y}"


def nothing_new(preview: ImportPreview) -> bool:
    """Whether every message of a previewed file is stored already (the same file sent again)."""
    return preview.messages > 0 and preview.already >= preview.messages


def found_text(preview: ImportPreview, timezone: str) -> str:
    """What a preview found, and what importing it will cost, as the person reads it."""
    assistant = SOURCES.get(preview.source, preview.source)
    lines = [
        f"This is a {assistant} export: {_count(preview.conversations, 'conversation')} with "
        f"{_count(preview.messages, 'message')}, from {_day(preview.first_at, timezone)} to "
        f"{_day(preview.last_at, timezone)} ({_count(preview.days, 'day')})."
    ]
    if preview.skipped:
        lines.append(f"{_count(preview.skipped, 'conversation')} without any message will be left out.")
    if preview.already:
        lines.append(
            f"{_count(preview.already, 'conversation')} of it I have already; those stay as they are."
        )
    cost = f", about ${preview.dollars:,.2f}" if preview.dollars is not None else ""
    lines.append(
        f"Importing stores them at once and searchable; then I write their day summaries and learn what "
        f"you told {assistant} in the background: about {_count(preview.model_calls, 'model call')} "
        f"({preview.input_tokens:,} tokens{cost})."
    )
    lines.append(f"What {assistant} said stays {assistant}'s: I learn facts only from your own lines.")
    return "\n".join(lines)


def progress_text(progress: ImportProgress, source: str) -> str:
    """The progress line edited while a run stores."""
    assistant = SOURCES.get(source, source)
    return (
        f"Importing your {assistant} history… {progress.conversations_done:,} of "
        f"{_count(progress.conversations_total, 'conversation')}, {progress.messages_done:,} of "
        f"{_count(progress.messages_total, 'message')} stored."
    )


def stored_text(result: ImportResult, source: str, timezone: str) -> str:
    """The last message of a run: what was stored, and what happens next."""
    assistant = SOURCES.get(source, source)
    return (
        f"Done: I stored {_count(result.conversations, 'conversation')} and "
        f"{_count(result.messages, 'message')} from {assistant}, covering {_count(result.days, 'day')} "
        f"({_day(result.first_at, timezone)} to {_day(result.last_at, timezone)}). You can ask me about "
        f"them now; I'll learn the facts in them and write their day summaries in the background."
    )


class ImportNotes(Protocol):
    """Who hears how a run goes (the Telegram chat it came from); the page polls on its own."""

    async def progress(self, import_id: int, progress: ImportProgress) -> None:
        """A run stored some more (at most every PROGRESS_EVERY_SECONDS)."""

    async def finished(self, import_id: int, result: ImportResult | None, error: str | None) -> None:
        """A run ended: stored (`result`), or stopped by `error` (what the person is told)."""


@dataclass
class ImportRunner:
    """The runs storing in this process, one task each: a run already running here is not started
    twice, and closing cancels them (their lease lapses; the next start resumes them)."""

    notes: ImportNotes | None = None
    worker_id: str = field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")
    # Runs that broke here on something unexpected: left alone until the next start (BROKE says so).
    broken: set[int] = field(default_factory=set)
    _tasks: dict[int, asyncio.Task[None]] = field(default_factory=dict)
    _others: set[asyncio.Task[None]] = field(default_factory=set)

    def running(self, import_id: int) -> bool:
        """Whether run `import_id` is being stored by this process now."""
        task = self._tasks.get(import_id)
        return task is not None and not task.done()

    def start(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        settings: Settings,
        import_id: int,
        path: Path,
    ) -> bool:
        """Store run `import_id` from `path` in the background; False when it is already running here."""
        if self.running(import_id):
            return False
        work = self._run(sessions, clock, settings, import_id, path)
        task = asyncio.create_task(work, name=f"import {import_id}")
        self._tasks[import_id] = task
        task.add_done_callback(lambda _: self._tasks.pop(import_id, None))
        return True

    def spawn(self, work: Awaitable[None], name: str) -> None:
        """Background work of the imports (resuming at start), cancelled with them at close."""

        async def guarded() -> None:
            try:
                await work
            except Exception:
                logger.exception("import work failed", extra={"work": name})

        task = asyncio.create_task(guarded(), name=name)
        self._others.add(task)
        task.add_done_callback(self._others.discard)

    async def wait(self, import_id: int) -> None:
        """Until run `import_id` has ended here (at once when it is not running)."""
        task = self._tasks.get(import_id)
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def _run(
        self,
        sessions: async_sessionmaker[AsyncSession],
        clock: Clock,
        settings: Settings,
        import_id: int,
        path: Path,
    ) -> None:
        shown = 0.0

        async def progress(step: ImportProgress) -> None:
            nonlocal shown
            if self.notes is None or time.monotonic() - shown < PROGRESS_EVERY_SECONDS:
                return
            shown = time.monotonic()
            await self.notes.progress(import_id, step)

        result: ImportResult | None = None
        error: str | None = None
        try:
            result = await run_import(
                sessions,
                import_id,
                path,
                clock=clock,
                worker_id=self.worker_id,
                progress=progress,
                settings=settings,
            )
        except ImportBusyError:
            # Another process stores it now (a second instance, or one whose lease has not lapsed).
            logger.info("import left to the process storing it", extra={"import_id": import_id})
            return
        except ImportFileError as exc:
            error = FAILED.format(reason=str(exc))
            remove(path)  # not the file previewed, or unreadable: nothing to resume from
        except Exception:
            # The task's top: nothing else would hear of it, and the next start resumes the run.
            logger.exception("import failed", extra={"import_id": import_id})
            self.broken.add(import_id)
            error = BROKE
        else:
            remove(path)
        logger.info("import ended", extra={"import_id": import_id, "stored": result is not None})
        if self.notes is not None:
            try:
                await self.notes.finished(import_id, result, error)
            except Exception:
                logger.exception("import's last message not sent", extra={"import_id": import_id})

    async def close(self) -> None:
        """Cancel the runs and work of this process (a run's lease lapses; the next start resumes it)."""
        tasks = [*self._tasks.values(), *self._others]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
