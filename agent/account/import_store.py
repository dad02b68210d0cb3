"""Storing an export's conversations: each whole in one transaction, resumable, never twice.

A conversation is stored with all its new lines in one transaction, which also counts them into the
run and renews the run's lease; when the run is no longer this worker's (cancelled, or taken over
after its lease lapsed) the transaction stores nothing and the run stops.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.import_formats import ExportReader, ImportedConversation, ImportedMessage
from agent.core.clock import Clock, local_day
from db.models import ImportRun
from db.repositories.imports import DaySpan, ImportRepository, KnownConversation, NewLine

# Conversations handed from the parsing thread at a time, and the lines that cap such a batch.
BATCH_CONVERSATIONS = 16
BATCH_LINES = 2000
_HASH_CHUNK = 1 << 20


def file_digest(path: Path) -> str:
    """The sha256 of the file as sent (what makes the same file the same run)."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        while chunk := file.read(_HASH_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def external_id(source: str, conversation: ImportedConversation) -> str:
    """The conversation's id among the person's imports: its source and its id in the export."""
    key = f"{source}:{conversation.external_id}"
    return key if len(key) <= 200 else f"{source}:sha256:{hashlib.sha256(key.encode()).hexdigest()}"


def new_lines(conversation: ImportedConversation, known: KnownConversation | None) -> list[ImportedMessage]:
    """The lines not stored yet: all of a new conversation, those after a stored one's end."""
    if known is None:
        return list(conversation.messages)
    return [message for message in conversation.messages if message.sent_at > known.last_message_at]


def _batches(reader: ExportReader) -> Generator[list[ImportedConversation]]:
    batch: list[ImportedConversation] = []
    lines = 0
    for conversation in reader:
        batch.append(conversation)
        lines += len(conversation.messages)
        if len(batch) >= BATCH_CONVERSATIONS or lines >= BATCH_LINES:
            yield batch
            batch, lines = [], 0
    if batch:
        yield batch


async def conversation_batches(reader: ExportReader) -> AsyncGenerator[list[ImportedConversation]]:
    """The export's conversations in small batches, parsed in a thread so the event loop stays free;
    the next batch is parsed while the caller stores this one."""
    batches = _batches(reader)
    pending = asyncio.ensure_future(asyncio.to_thread(next, batches, None))
    try:
        while (batch := await pending) is not None:
            pending = asyncio.ensure_future(asyncio.to_thread(next, batches, None))
            yield batch
    finally:
        # A caller that stops early: the batch being parsed finishes before the file is let go.
        await asyncio.wait({pending})
        if not pending.cancelled() and pending.exception() is None:
            batches.close()


@dataclass
class ImportStore:
    """A run in progress: who stores it, for whom, and what it has done."""

    sessions: async_sessionmaker[AsyncSession]
    run: ImportRun
    timezone: str
    worker_id: str
    clock: Clock
    known: dict[str, KnownConversation]
    segments: dict[date, int] = field(default_factory=dict)
    conversations: int = 0
    messages: int = 0
    days: set[date] = field(default_factory=set)

    async def store(self, source: str, conversation: ImportedConversation) -> bool:
        """Store what is new of one conversation in one transaction; False when the run is no longer ours."""
        key = external_id(source, conversation)
        known = self.known.get(key)
        fresh = new_lines(conversation, known)
        lines = [NewLine(m.role, m.text, m.sent_at, local_day(m.sent_at, self.timezone)) for m in fresh]
        for message in conversation.messages:
            self.days.add(local_day(message.sent_at, self.timezone))
        async with self.sessions() as session, session.begin():
            repository = ImportRepository(session)
            if not await repository.advance(
                self.run.id,
                self.worker_id,
                now=self.clock.now(),
                conversations=1 if lines else 0,
                messages=len(lines),
            ):
                return False
            if not lines:
                return True
            if known is None:
                conversation_id = await repository.add_conversation(
                    user_id=self.run.user_id,
                    import_id=self.run.id,
                    source=source,
                    external_id=key,
                    lines=lines,
                )
            else:
                conversation_id = known.id
                await repository.extend_conversation(known, lines)
            spans: dict[date, DaySpan] = {}
            for line in lines:
                spans.setdefault(line.day, DaySpan(line.sent_at, line.sent_at)).add(line.sent_at)
            missing = {day: span for day, span in spans.items() if day not in self.segments}
            if missing:
                today = local_day(self.clock.now(), self.timezone)
                opened = await repository.open_days(self.run.user_id, missing, self.timezone, today=today)
                self.segments.update(opened)
            ids = await repository.add_lines(
                user_id=self.run.user_id, conversation_id=conversation_id, lines=lines, segments=self.segments
            )
            for message_id, line in zip(ids, lines, strict=True):
                span = spans[line.day]
                span.first_id = span.first_id or message_id
                span.last_id = message_id
            await repository.count_into_days({self.segments[day]: span for day, span in spans.items()})
        self.known[key] = KnownConversation(
            id=conversation_id,
            last_message_at=lines[-1].sent_at,
            message_count=(known.message_count if known else 0) + len(lines),
        )
        self.conversations += 1
        self.messages += len(lines)
        return True


async def store_retrying(state: ImportStore, source: str, conversation: ImportedConversation) -> bool:
    """Store a conversation; once more when a live turn opened one of its days at the same moment."""
    try:
        return await state.store(source, conversation)
    except IntegrityError:
        state.segments.clear()  # some may have been opened in the transaction that was rolled back
        async with state.sessions() as session:
            state.known = await ImportRepository(session).known(state.run.user_id)
        return await state.store(source, conversation)
