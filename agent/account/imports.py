"""Importing a person's history from another assistant's export: preview, begin, run, cancel.

1. `preview_import` reads the whole file (streamed, stores nothing) and says what it holds and what
   importing it will cost; a bad file raises `ImportFileError` here, before anything is stored.
2. `begin_import` records the run, one per person and file (its sha256): the same file again is the
   same run.
3. `run_import` stores it, one transaction per conversation (the conversation row and all its
   lines), under a lease renewed at every conversation, so two processes never store one run at
   once and a run stopped anywhere (a crash, kill -9) resumes at the next conversation it finds not
   yet stored. A conversation already stored (by id in the export) gains only its lines newer than
   its stored end; anything else is skipped, so a second import adds nothing.
4. `cancel_import` stops a run before its next conversation; what was stored stays.

Imported lines are the person's (role "user") and the other assistant's (role OTHER), of kind
"imported", each in the day segment of its day in the person's time zone. Full text finds them at
once (the database's triggers and generated columns); vectors follow through the search index's
catch-up. The conversations wait as IMPORT_WAITING for the import pacer (jobs/), which queues them
for post-processing at the operator's pace. docs/import.md is the person's and operator's page.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.import_formats import (
    SOURCES,
    ExportReader,
    ImportedConversation,
    ImportedMessage,
    ImportFileError,
    ReadLimits,
)
from agent.account.import_store import (
    ImportStore,
    conversation_batches,
    external_id,
    file_digest,
    new_lines,
    store_retrying,
)
from agent.core.clock import Clock, local_day
from agent.core.errors import NikitaError
from agent.core.prices import estimate_cost
from agent.core.settings import Settings
from db.models import ImportRun, User
from db.repositories.imports import (
    CANCELLED,
    FAILED,
    RUNNING,
    STORED,
    ImportRepository,
    KnownConversation,
)

__all__ = [
    "SOURCES",
    "ImportBusyError",
    "ImportFileError",
    "ImportPreview",
    "ImportProgress",
    "ImportResult",
    "ImportedConversation",
    "ImportedMessage",
    "begin_import",
    "cancel_import",
    "preview_import",
    "run_import",
]

# Estimates of what the background work on an imported history costs (docs/import.md): extraction
# reads each conversation once, a day summary reads the day's lines once; each call also sends its
# instructions and what is already known, and writes an answer of about this size.
EXTRACTION_OVERHEAD_TOKENS = 2000
SUMMARY_OVERHEAD_TOKENS = 1500
OUTPUT_TOKENS_PER_CALL = 400
CHARS_PER_TOKEN = 4

Progress = Callable[["ImportProgress"], Awaitable[None]]


class ImportBusyError(NikitaError):
    """Another process is storing this run now (its lease has not lapsed)."""


@dataclass(frozen=True)
class ImportPreview:
    """What an export holds and what importing it costs; nothing stored yet."""

    source: str
    assistant: str
    digest: str
    conversations: int
    messages: int
    skipped: int
    first_at: datetime | None
    last_at: datetime | None
    days: int
    model_calls: int
    input_tokens: int
    dollars: Decimal | None
    already: int


@dataclass(frozen=True)
class ImportProgress:
    """How far a run has got (conversations and messages of the export, stored or found stored)."""

    conversations_done: int
    conversations_total: int
    messages_done: int
    messages_total: int


@dataclass(frozen=True)
class ImportResult:
    """What a run did: conversations that gained lines, lines newly stored, and the export's span."""

    import_id: int
    conversations: int
    messages: int
    days: int
    first_at: datetime | None
    last_at: datetime | None


def read_limits(settings: Settings | None) -> ReadLimits:
    """The IMPORT_* caps on reading a file."""
    if settings is None:
        return ReadLimits()
    return ReadLimits(
        max_bytes=settings.import_max_bytes,
        max_ratio=settings.import_max_ratio,
        max_depth=settings.import_max_depth,
    )


async def _person(session: AsyncSession, user_id: int) -> User:
    user = await session.get(User, user_id)
    if user is None:
        raise ImportFileError("There is no such person to import for.")
    if user.kind != "person":
        raise ImportFileError("A history is imported in a private chat only, never into a group.")
    return user


@dataclass
class _Survey:
    """The counts a preview reports, gathered in one pass over the file."""

    timezone: str
    known: dict[str, KnownConversation]
    conversations: int = 0
    messages: int = 0
    already: int = 0
    first_at: datetime | None = None
    last_at: datetime | None = None
    days: set[date] = field(default_factory=set)
    new_conversations: int = 0
    new_days: dict[date, int] = field(default_factory=dict)
    new_chars: int = 0

    def add(self, source: str, conversation: ImportedConversation) -> None:
        self.conversations += 1
        self.messages += len(conversation.messages)
        fresh = new_lines(conversation, self.known.get(external_id(source, conversation)))
        self.already += len(conversation.messages) - len(fresh)
        start, end = conversation.messages[0].sent_at, conversation.messages[-1].sent_at
        self.first_at = start if self.first_at is None else min(self.first_at, start)
        self.last_at = end if self.last_at is None else max(self.last_at, end)
        for message in conversation.messages:
            self.days.add(local_day(message.sent_at, self.timezone))
        if fresh:
            self.new_conversations += 1
            for message in fresh:
                day = local_day(message.sent_at, self.timezone)
                self.new_days[day] = self.new_days.get(day, 0) + len(message.text)
                self.new_chars += len(message.text)


def _survey(path: Path, limits: ReadLimits, survey: _Survey) -> tuple[str, int]:
    reader = ExportReader(path, limits)
    for conversation in reader:
        assert reader.source is not None
        survey.add(reader.source, conversation)
    assert reader.source is not None
    return reader.source, reader.skipped


async def preview_import(
    sessions: async_sessionmaker[AsyncSession], user_id: int, path: Path, *, timezone: str, settings: Settings
) -> ImportPreview:
    """Read the whole export and say what importing it means; stores nothing.

    Raises `ImportFileError` (its text the person-facing reason) for a file that cannot be imported.
    """
    async with sessions() as session:
        # Someone not met yet (an operator's dry run) has nothing stored: everything is new.
        if await session.get(User, user_id) is not None:
            await _person(session, user_id)
        known = await ImportRepository(session).known(user_id)
    survey = _Survey(timezone=timezone, known=known)
    digest = await asyncio.to_thread(file_digest, path)
    source, skipped = await asyncio.to_thread(_survey, path, read_limits(settings), survey)
    calls = survey.new_conversations + len(survey.new_days)
    input_tokens = (
        survey.new_conversations * EXTRACTION_OVERHEAD_TOKENS
        + len(survey.new_days) * SUMMARY_OVERHEAD_TOKENS
        + 2 * survey.new_chars // CHARS_PER_TOKEN
    )
    cost = estimate_cost(settings.summary_model, input_tokens, calls * OUTPUT_TOKENS_PER_CALL)
    return ImportPreview(
        source=source,
        assistant=SOURCES[source],
        digest=digest,
        conversations=survey.conversations,
        messages=survey.messages,
        skipped=skipped,
        first_at=survey.first_at,
        last_at=survey.last_at,
        days=len(survey.days),
        model_calls=calls,
        input_tokens=input_tokens,
        dollars=None if cost is None else cost.billed,
        already=survey.already,
    )


async def begin_import(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    path: Path,
    preview: ImportPreview,
    *,
    file_name: str | None,
    file_ref: str | None,
    chat_id: int | None = None,
    now: datetime,
) -> int:
    """Record the run of this previewed file and return its id; the same file again is the same run.

    `path` is the file the preview read (kept as `file_ref` when no other reference is given).
    """
    ref = file_ref if file_ref is not None else str(path)
    for _attempt in range(2):
        try:
            async with sessions() as session, session.begin():
                await _person(session, user_id)
                repository = ImportRepository(session)
                run = await repository.run_for(user_id, preview.digest)
                if run is None:
                    run = ImportRun(
                        user_id=user_id,
                        source=preview.source,
                        digest=preview.digest,
                        status="previewed",
                        conversations_stored=0,
                        messages_stored=0,
                        created_at=now,
                    )
                    session.add(run)
                run.file_name = (file_name or path.name)[:200]
                run.file_ref = ref
                run.conversations_total = preview.conversations
                run.messages_total = preview.messages
                run.first_at = preview.first_at
                run.last_at = preview.last_at
                if chat_id is not None:
                    run.chat_id = chat_id
                if run.status == CANCELLED:
                    run.status = "previewed"
                await session.flush()
                return run.id
        except IntegrityError:
            continue  # the same file begun twice at once: the other one's run is this run
    raise ImportBusyError("the run could not be recorded")


async def cancel_import(sessions: async_sessionmaker[AsyncSession], user_id: int, import_id: int) -> bool:
    """Stop the person's run before its next conversation (what was stored stays); False if it had ended."""
    async with sessions() as session, session.begin():
        run = await session.get(ImportRun, import_id)
        if run is None or run.user_id != user_id or run.status not in ("previewed", RUNNING):
            return False
        run.status = CANCELLED
        run.claimed_by = None
        run.claimed_at = None
        return True


async def run_import(
    sessions: async_sessionmaker[AsyncSession],
    import_id: int,
    path: Path,
    *,
    clock: Clock,
    worker_id: str,
    progress: Progress | None = None,
    progress_every: int = 25,
    settings: Settings | None = None,
) -> ImportResult:
    """Store the run's file (resuming where an earlier run of it stopped) and return what it did.

    Raises `ImportBusyError` when another process holds the run's lease, `ImportFileError` when the
    file is not the one previewed or cannot be read (what was stored stays; the run is `failed`).
    A run cancelled meanwhile stops before its next conversation and returns what it did.
    """
    lease = timedelta(seconds=settings.import_lease_seconds if settings is not None else 300)
    async with sessions() as session, session.begin():
        run = await session.get(ImportRun, import_id)
        if run is None:
            raise ImportFileError("There is no such import.")
        person = await _person(session, run.user_id)
        now = clock.now()
        if run.status == CANCELLED:
            return ImportResult(import_id, 0, 0, 0, run.first_at, run.last_at)
        repository = ImportRepository(session)
        if not await repository.claim(import_id, worker_id, now=now, lapsed_before=now - lease):
            raise ImportBusyError("another process is importing this file now")
        known = await repository.known(run.user_id)
        timezone = person.timezone
    state = ImportStore(sessions, run, timezone, worker_id, clock, known)
    try:
        digest = await asyncio.to_thread(file_digest, path)
        if digest != run.digest:
            raise ImportFileError("This file is not the one that was previewed.")
        reader = ExportReader(path, read_limits(settings))
        done = messages_done = 0
        async with contextlib.aclosing(conversation_batches(reader)) as batches:
            async for batch in batches:
                assert reader.source is not None
                for conversation in batch:
                    if not await store_retrying(state, reader.source, conversation):
                        return _result(state)  # cancelled, or taken over: the rest is not ours
                    done += 1
                    messages_done += len(conversation.messages)
                    if progress is not None and done % progress_every == 0:
                        await progress(
                            ImportProgress(done, run.conversations_total, messages_done, run.messages_total)
                        )
    except ImportFileError as exc:
        async with sessions() as session, session.begin():
            await ImportRepository(session).finish(
                import_id, worker_id, status=FAILED, now=clock.now(), error=str(exc)
            )
        raise
    async with sessions() as session, session.begin():
        await ImportRepository(session).finish(import_id, worker_id, status=STORED, now=clock.now())
    if progress is not None:
        await progress(ImportProgress(done, run.conversations_total, messages_done, run.messages_total))
    return _result(state)


def _result(state: ImportStore) -> ImportResult:
    return ImportResult(
        import_id=state.run.id,
        conversations=state.conversations,
        messages=state.messages,
        days=len(state.days),
        first_at=state.run.first_at,
        last_at=state.run.last_at,
    )


def learned_text(assistant: str, facts: int, days: int) -> str:
    """The last message of an import, once all of it is read: what it taught, over how many days."""
    span = f"{days:,} day" + ("" if days == 1 else "s")
    if facts == 0:
        return (
            f"I've finished reading your {assistant} history ({span}). I didn't find anything about you "
            "to keep, but I can still look things up in it when you ask."
        )
    things = f"{facts:,} thing" + ("" if facts == 1 else "s")
    return (
        f"I've finished reading your {assistant} history: I learned {things} about you over {span} of "
        "talks. /memory shows what I keep, and you can ask me about anything in it."
    )
