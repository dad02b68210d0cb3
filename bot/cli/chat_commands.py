"""The terminal chat's commands: the Telegram bot's user commands that make sense offline, and the
chat's own (`/import`, `/wait`, `/context`, `/quit`). None of them reaches the model or the transcript."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TextIO

from agent.account.export import PartWriter, export_events
from agent.account.imports import ImportFileError, begin_import, preview_import, run_import
from agent.account.users import get_or_create_user
from agent.context import format_snapshot
from agent.core.clock import ShiftedClock
from agent.memory.listing import listing_lines, listing_of
from agent.reports.texts import memory_report
from bot.handlers.commands import (
    FORGET_ASK,
    FORGOTTEN,
    FORGOTTEN_PENDING,
    NOTHING_TO_SKIP,
    export_stem,
    language_answer,
    skipped,
    timezone_answer,
)
from bot.importing import NOTHING_NEW, existing_file, found_text, nothing_new, stored_text
from bot.runtime import Runtime
from db.models import User
from db.repositories.prompts import PromptRepository
from jobs.scheduler import run_minute_jobs, run_nightly

logger = logging.getLogger(__name__)

HELP = "Type a message, or /help for the commands."


@dataclass
class Terminal:
    """The chat's runtime, clock and user, and where it prints."""

    runtime: Runtime
    clock: ShiftedClock
    user_name: str
    user_id: int
    stdout: TextIO
    # When the jobs last ran, in chat time (the chat runs them again a minute later).
    jobs_ran_at: datetime
    # The person is still being onboarded: their messages go to the onboarding turn.
    onboarding: bool = False

    def say(self, text: str) -> None:
        """Print one answer."""
        print(text, file=self.stdout, flush=True)

    async def run_jobs(self) -> dict[str, dict[str, object]]:
        """The bot's minute jobs and the nightly finalisation, now, on the chat's clock."""
        results: dict[str, dict[str, object]] = dict(await run_minute_jobs(self.runtime.jobs))
        results["nightly"] = await run_nightly(self.runtime.jobs)
        await self.runtime.settle()
        self.jobs_ran_at = self.clock.now()
        return results

    async def user(self) -> User:
        """The user's row as stored now."""
        async with self.runtime.sessions() as session:
            user = await session.get(User, self.user_id)
        if user is None:
            raise LookupError(self.user_id)
        return user


async def run_command(terminal: Terminal, text: str) -> bool:
    """Answer one `/command`; False when the chat should end."""
    name, _, rest = text[1:].partition(" ")
    name = name.lower()
    if name in {"quit", "exit"}:
        return False
    command, _ = COMMANDS.get(name, (None, ""))
    if command is None:
        terminal.say(f"There is no /{name} here. {HELP}")
        return True
    await command(terminal, rest.strip())
    return True


async def _help(terminal: Terminal, rest: str) -> None:
    terminal.say("\n".join(f"/{name} - {text}" for name, (_, text) in COMMANDS.items()))


async def _skip(terminal: Terminal, rest: str) -> None:
    user = await terminal.user()
    if user.onboarding_status == "complete":
        terminal.say(NOTHING_TO_SKIP)
        return
    await terminal.runtime.turns.skip_onboarding(user.id, terminal.user_name)
    terminal.onboarding = False
    terminal.say(skipped(user.name or terminal.user_name))


async def _memory(terminal: Terminal, rest: str) -> None:
    runtime, user, now = terminal.runtime, await terminal.user(), terminal.clock.now()
    report = await memory_report(runtime.sessions, user.id, now, facts=False)
    listing = await listing_of(runtime.sessions, user.id, user.timezone, now=now, settings=runtime.settings)
    facts = listing_lines(listing.facts, source_chars=200, quote_chars=100) or [
        "I don't remember any facts about you yet."
    ]
    terminal.say("\n".join([report, "", *facts]))


async def _timezone(terminal: Terminal, rest: str) -> None:
    terminal.say(await timezone_answer(terminal.runtime.sessions, await terminal.user(), rest))


async def _language(terminal: Terminal, rest: str) -> None:
    terminal.say(await language_answer(terminal.runtime.sessions, await terminal.user(), rest))


async def _export(terminal: Terminal, rest: str) -> None:
    runtime = terminal.runtime
    folder = await asyncio.to_thread(_folder, rest or ".")
    settings = runtime.settings
    writer = PartWriter(
        folder, part_bytes=settings.export_part_bytes, stem=export_stem(settings.persona_name)
    )
    parts = await writer.write_all(export_events(runtime.sessions, terminal.user_id, runtime.data_stores))
    terminal.say("Everything I have stored about you: " + ", ".join(str(path) for path in parts))


async def _forget(terminal: Terminal, rest: str) -> None:
    if rest.lower() != "confirm":
        terminal.say(FORGET_ASK.replace("(You can also type /forget confirm.)", "Type /forget confirm."))
        return
    runtime = terminal.runtime
    pending = (await runtime.forget(terminal.user_id)).stores_pending
    # The chat goes on as a stranger of the same name, as a Telegram user writing again would.
    user, _ = await get_or_create_user(
        runtime.sessions,
        key=f"cli:{terminal.user_name}",
        now=terminal.clock.now(),
        timezone=runtime.settings.default_timezone,
        name=terminal.user_name,
    )
    terminal.user_id = user.id
    terminal.say(FORGOTTEN_PENDING if pending else FORGOTTEN)


async def _import(terminal: Terminal, rest: str) -> None:
    if not rest:
        terminal.say(
            "/import takes the path of a ChatGPT or Claude export: the .zip, or its conversations.json"
        )
        return
    path = await asyncio.to_thread(existing_file, rest)
    if path is None:
        terminal.say(f"There is no file {rest}.")
        return
    runtime, user = terminal.runtime, await terminal.user()
    try:
        preview = await preview_import(
            runtime.sessions, user.id, path, timezone=user.timezone, settings=runtime.settings
        )
        if nothing_new(preview):
            terminal.say(NOTHING_NEW)
            return
        terminal.say(found_text(preview, user.timezone))
        import_id = await begin_import(
            runtime.sessions,
            user.id,
            path,
            preview,
            file_name=path.name,
            file_ref=str(path.resolve()),
            now=terminal.clock.now(),
        )
        result = await run_import(
            runtime.sessions,
            import_id,
            path,
            clock=terminal.clock,
            worker_id="chat",
            settings=runtime.settings,
        )
    except ImportFileError as exc:
        terminal.say(str(exc))
        return
    terminal.say(f"{stored_text(result, preview.source, user.timezone)} (/wait lets that happen now.)")


async def _wait(terminal: Terminal, rest: str) -> None:
    try:
        minutes = float(rest) if rest else 16.0
    except ValueError:
        terminal.say("/wait takes a number of minutes, e.g. /wait 20")
        return
    if not 0 < minutes <= 60 * 24 * 366:
        terminal.say("/wait takes a number of minutes between 0 and a year")
        return
    terminal.clock.advance(timedelta(minutes=minutes))
    results = await terminal.run_jobs()
    closed = results.get("close-idle-conversations", {}).get("closed", 0)
    processed = results.get("postprocess", {}).get("processed", 0)
    terminal.say(
        f"(time moves on by {minutes:g} minutes: {closed} conversation(s) closed, {processed} remembered)"
    )


async def _context(terminal: Terminal, rest: str) -> None:
    async with terminal.runtime.sessions() as session:
        prompt = await PromptRepository(session).latest_for(terminal.user_id)
    if prompt is None:
        terminal.say("(no message yet: the context is built for each message)")
    elif rest.lower() == "counts":
        terminal.say(format_snapshot(prompt.context_snapshot))
    else:
        terminal.say(
            f"(what the model read with your last message, each tier in its tag)\n{prompt.instructions}"
        )


def _folder(name: str) -> Path:
    folder = Path(name).expanduser()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# Each command: what runs it (/quit and /exit end the chat in `run_command`) and what /help says of it.
COMMANDS: dict[str, tuple[Callable[[Terminal, str], Awaitable[None]] | None, str]] = {
    "help": (_help, "these commands"),
    "memory": (_memory, "what I remember about you"),
    "timezone": (_timezone, "show or set your time zone, e.g. /timezone Lisbon"),
    "language": (_language, "show or set the language you write in, e.g. /language French"),
    "export": (_export, "all your data as JSON files in this folder (or /export FOLDER)"),
    "forget": (_forget, "delete everything I know about you"),
    "skip": (_skip, "skip the getting-to-know-you questions and just talk"),
    "import": (_import, "import a ChatGPT or Claude export, e.g. /import ~/Downloads/chatgpt-export.zip"),
    "wait": (_wait, "let MINUTES pass (default 16): the conversation closes and its memory is written"),
    "context": (_context, "what the model read with your last message (/context counts: the tiers' sizes)"),
    "quit": (None, "leave (or /exit; your memory stays)"),
}
