"""`python -m bot chat`: the bot in a terminal, no Telegram needed.

Messages go through the same `reply()` as Telegram's, and the same background jobs run (closing
idle conversations, post-processing, day summaries), on the chat's own clock: `/wait 20` moves it on and
runs them, so the next message starts a new conversation that remembers the last one. The clock never
goes back before the user's stored last message, so a `/wait` survives a restart. Commands never
reach the model (bot/cli/chat_commands.py).

With ONBOARDING_ENABLED set (the chat's default is off, so the offline demo shows the memory from the
first message), a new name goes through the same onboarding as a new person on Telegram: the
onboarding agent asks first, answers until it has what it needs (or `/skip`), then the chat begins.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from typing import TextIO

from agent.account.users import get_or_create_user
from agent.core.clock import ShiftedClock
from agent.core.settings import Settings
from agent.turn.transcript import Incoming
from bot.cli.chat_commands import HELP, Terminal, run_command
from bot.runtime import build_runtime

# The bot runs its jobs every minute; the chat runs them before a message once this much chat time
# has passed since the last run, and after every /wait.
JOBS_EVERY = timedelta(minutes=1)


async def run_chat(
    settings: Settings,
    *,
    user_name: str,
    stdin: TextIO = sys.stdin,
    stdout: TextIO = sys.stdout,
    clock: ShiftedClock | None = None,
) -> None:
    """Read lines, answer each through the turn service, until end of input or /quit."""
    clock = clock or ShiftedClock()
    runtime = await build_runtime(settings, clock=clock)
    try:
        await runtime.warm_up()  # before the first prompt: the terminal has nobody waiting yet
        onboard = onboards(settings)
        user, created = await get_or_create_user(
            runtime.sessions,
            key=f"cli:{user_name}",
            now=clock.now(),
            timezone=settings.default_timezone,
            # As on Telegram: onboarding asks for the name, the chat's name is only its fallback.
            name=None if onboard else user_name,
            onboarding_status="pending" if onboard else "complete",
        )
        if user.last_message_at is not None:
            clock.not_before(user.last_message_at + timedelta(seconds=1))
        terminal = Terminal(runtime, clock, user_name, user.id, stdout, jobs_ran_at=clock.now())
        terminal.onboarding = user.onboarding_status != "complete"
        greeting = "Nice to meet you" if created else "Welcome back"
        terminal.say(f"{greeting}, {user_name}. {HELP}")
        if created and terminal.onboarding:
            # Telegram's first message is /start, which onboarding answers with its first question.
            await onboarding_turn(terminal, "/start")
        while True:
            print("you> ", end="", file=stdout, flush=True)
            line = await asyncio.to_thread(stdin.readline)
            if not line:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not await run_command(terminal, text):
                    break
                continue
            if terminal.onboarding and await onboarding_turn(terminal, text):
                continue
            if clock.now() - terminal.jobs_ran_at >= JOBS_EVERY:
                await terminal.run_jobs()
            result = await runtime.turns.reply(
                Incoming(owner=terminal.user_id, text=text, sent_at=clock.now())
            )
            marker = " (new session)" if result.new_conversation else ""
            terminal.say(f"{settings.persona_name.lower()}{marker}> {result.text}")
    finally:
        await runtime.close()


def onboards(settings: Settings) -> bool:
    """Whether the chat onboards a new name: ONBOARDING_ENABLED set, and true."""
    return settings.onboarding_enabled and "onboarding_enabled" in settings.model_fields_set


async def onboarding_turn(terminal: Terminal, text: str) -> bool:
    """Answer `text` in onboarding, as the Telegram handler does; False when onboarding was complete."""
    runtime = terminal.runtime
    answered = await runtime.turns.onboard(
        Incoming(owner=terminal.user_id, text=text, sent_at=terminal.clock.now()),
        fallback_name=terminal.user_name,
    )
    terminal.onboarding = answered is not None and not answered.complete
    if answered is None:
        return False
    terminal.say(f"{runtime.settings.persona_name.lower()}> {answered.text}")
    return True
