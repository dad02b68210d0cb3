"""`python -m bot chat`: talk to the same `reply()` from a terminal, no Telegram needed."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import TextIO

from agent.account.users import get_or_create_user
from agent.context import format_snapshot
from agent.core.settings import Settings
from bot.runtime import build_runtime
from db.repositories import PromptRepository

HELP = """Commands: /wait MINUTES (pretend time passed), /context (last context snapshot), /quit"""


async def run_chat(
    settings: Settings, *, user_name: str, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout
) -> None:
    """Read lines, answer each through the turn service, until end of input or /quit."""
    runtime = await build_runtime(settings)
    offset = timedelta()
    try:
        user, created = await get_or_create_user(
            runtime.sessions,
            key=f"cli:{user_name}",
            now=runtime.clock.now(),
            timezone=settings.default_timezone,
            name=user_name,
        )
        greeting = "Nice to meet you" if created else "Welcome back"
        print(f"{greeting}, {user_name}. {HELP}", file=stdout, flush=True)
        while True:
            print("you> ", end="", file=stdout, flush=True)
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            if text in {"/quit", "/exit"}:
                break
            if text.startswith("/wait"):
                minutes = float(text.split()[1]) if len(text.split()) > 1 else 16.0
                offset += timedelta(minutes=minutes)
                print(f"(time moves on by {minutes:g} minutes)", file=stdout, flush=True)
                continue
            if text == "/context":
                async with runtime.sessions() as session:
                    prompt = await PromptRepository(session).latest_for(user.id)
                shown = format_snapshot(prompt.context_snapshot) if prompt else "(no turn yet)"
                print(shown, file=stdout, flush=True)
                continue
            result = await runtime.turns.reply(user.id, text, runtime.clock.now() + offset)
            marker = " (new session)" if result.new_session else ""
            print(f"nikita{marker}> {result.text}", file=stdout, flush=True)
    finally:
        await runtime.close()
