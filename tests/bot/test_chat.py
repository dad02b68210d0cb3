"""The terminal chat drives the same turn as Telegram."""

from __future__ import annotations

import io

from agent.core.settings import Settings
from bot.cli.chat import run_chat


async def test_terminal_chat_remembers_and_shows_the_context(tmp_path: object) -> None:
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/chat.db",
        model="test",
        summary_model="test",
        _env_file=None,
    )
    stdin = io.StringIO("hello there\nsecond message\n/wait 20\nback after a break\n/context\n/quit\n")
    stdout = io.StringIO()
    await run_chat(settings, user_name="ana", stdin=stdin, stdout=stdout)
    out = stdout.getvalue()
    assert out.startswith("Nice to meet you, ana.")
    answers = [line for line in out.splitlines() if "nikita" in line and ">" in line]
    assert len(answers) == 3
    assert (
        "(new session)" in answers[0] and "(new session)" not in answers[1] and "(new session)" in answers[2]
    )
    assert "(time moves on by 20 minutes)" in out
    assert "History: " in out and "Tiers:" in out

    again = io.StringIO()
    await run_chat(settings, user_name="ana", stdin=io.StringIO(""), stdout=again)
    assert again.getvalue().startswith("Welcome back, ana.")
