"""`python -m bot import PATH --user TELEGRAM_USER_ID [--dry-run]`: import a ChatGPT or Claude export
for one person from a file, with a progress bar (docs/import.md)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from tqdm import tqdm  # type: ignore[import-untyped]

from agent.account.imports import (
    ImportBusyError,
    ImportFileError,
    ImportPreview,
    ImportProgress,
    begin_import,
    preview_import,
    run_import,
)
from agent.account.users import get_or_create_user
from agent.core.clock import Clock
from agent.core.settings import Settings
from bot.preflight import check_database
from db.engine import create_engine, session_factory
from db.migrate import upgrade_unless_at_head
from db.repositories.users import UserRepository


def telegram_key(telegram_id: int) -> str:
    """The user key of a Telegram user (bot/services.py `telegram_identity` makes the same)."""
    return f"telegram:{telegram_id}"


def describe(preview: ImportPreview, summary_model: str) -> str:
    """The preview as the operator reads it."""
    span = ""
    if preview.first_at is not None and preview.last_at is not None:
        span = f", {preview.first_at:%Y-%m-%d} to {preview.last_at:%Y-%m-%d} over {preview.days:,} days"
    skipped = f" ({preview.skipped:,} skipped: nothing to import)" if preview.skipped else ""
    dollars = f", about ${preview.dollars:.2f}" if preview.dollars is not None else ""
    return (
        f"{preview.assistant} export: {preview.conversations:,} conversations, {preview.messages:,} messages"
        f"{skipped}{span}; already stored: {preview.already:,} messages.\n"
        f"Learning from it: about {preview.model_calls:,} model calls, {preview.input_tokens:,} input tokens"
        f"{dollars} ({summary_model})."
    )


async def run_import_command(settings: Settings, path: Path, *, telegram_id: int, dry_run: bool) -> int:
    """Preview the export (an existing file's absolute path) and, unless a dry run, import it for the
    person; returns the exit status."""
    await check_database(settings)  # an unreachable database named by its host, in one line
    await upgrade_unless_at_head(settings.database_url)
    engine = create_engine(settings.database_url)
    sessions = session_factory(engine)
    clock = Clock()
    try:
        async with sessions() as session:
            user = await UserRepository(session).by_key(telegram_key(telegram_id))
        timezone = user.timezone if user is not None else settings.default_timezone
        try:
            # Read first: a file that cannot be imported leaves no trace, not even the person's row.
            preview = await preview_import(
                sessions, user.id if user is not None else 0, path, timezone=timezone, settings=settings
            )
            print(describe(preview, settings.summary_model), flush=True)
            if dry_run:
                print("dry run: nothing stored")
                return 0
            if user is None:
                user, _ = await get_or_create_user(
                    sessions,
                    key=telegram_key(telegram_id),
                    now=clock.now(),
                    timezone=settings.default_timezone,
                    telegram_id=telegram_id,
                    onboarding_status="pending" if settings.onboarding_enabled else "complete",
                )
            run_id = await begin_import(
                sessions,
                user.id,
                path,
                preview,
                file_name=path.name,
                file_ref=str(path),
                now=clock.now(),
            )
            with tqdm(total=preview.messages, unit="msg", desc="import", file=sys.stderr) as bar:

                async def advance(step: ImportProgress) -> None:
                    bar.update(step.messages_done - bar.n)

                result = await run_import(
                    sessions,
                    run_id,
                    path,
                    clock=clock,
                    worker_id=f"cli:{socket.gethostname()}:{os.getpid()}",
                    progress=advance,
                    progress_every=1,
                    settings=settings,
                )
        except ImportFileError as exc:
            print(f"not imported: {exc}", file=sys.stderr)
            return 1
        except ImportBusyError:
            print(
                "another process is importing this file for this person now; "
                "run again once it stops (or after IMPORT_LEASE_SECONDS)",
                file=sys.stderr,
            )
            return 1
        print(
            f"imported {result.messages:,} new messages in {result.conversations:,} conversations "
            f"(import {result.import_id}, {result.days:,} days); the background jobs learn from them next"
        )
        return 0
    finally:
        await engine.dispose()
