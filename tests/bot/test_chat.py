"""The terminal chat behaves like the bot: the same turn, the same jobs on its own clock, the offline
user commands, and with `--model demo` a memory a newcomer can watch work."""

from __future__ import annotations

import io
import os
import pty
import sqlite3
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from agent.core.clock import ShiftedClock, system_now
from agent.core.settings import Settings
from bot.cli.chat import run_chat

ROOT = Path(__file__).resolve().parents[2]
FIRST_SESSION = [
    "Hi! I am a nurse in Lyon. My sister is called Ana.",
    "I have an interview on Friday. Should I wear the blue suit?",
]


def answers(out: str) -> list[str]:
    """The bot's lines of a chat's output."""
    return [line.split("> ", 2)[-1] for line in out.splitlines() if line.startswith("you> nikita")]


def _drain(terminal: int) -> str:
    """What a finished process wrote to the pseudo-terminal."""
    chunks = []
    while True:
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # EIO: the other end is closed and everything was read
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def user_messages(database: Path) -> list[str]:
    """What the transcript holds as the user's messages."""
    with sqlite3.connect(database) as db:
        rows = db.execute(
            "SELECT content FROM transcript_messages WHERE role = 'user' ORDER BY id"
        ).fetchall()
    return [content for (content,) in rows]


def morning_clock() -> ShiftedClock:
    """The chat's clock at nine this morning (UTC, the default zone): a `/wait 20` then stays in the
    same day whenever the test runs, and "earlier today" means what it says."""
    now = system_now()
    return ShiftedClock(shift=now.replace(hour=9, minute=0, second=0, microsecond=0) - now)


async def test_wait_closes_the_conversation_and_the_next_one_remembers(tmp_path: Path) -> None:
    database = tmp_path / "chat.db"
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{database}", model="demo", summary_model="demo", _env_file=None
    )
    lines = [
        *FIRST_SESSION,
        "/wait 20",
        "/context",
        "hello again",
        "/context",
        "/memory",
        "/timeline",
        "/quit",
    ]
    stdout = io.StringIO()
    clock = morning_clock()
    await run_chat(
        settings, user_name="ana", stdin=io.StringIO("\n".join(lines) + "\n"), stdout=stdout, clock=clock
    )
    out = stdout.getvalue()
    assert out.startswith("Nice to meet you, ana.")
    first, second, third = answers(out)
    assert first == "(offline demo) Noted: 'Hi! I am a nurse in Lyon. My sister is called Ana.'."
    assert second.startswith("(offline demo) Noted: 'I have an interview on Friday.")
    assert "(new session)" in out.splitlines()[1] and "Noted: 'hello again'" in third
    assert "(time moves on by 20 minutes: 1 conversation(s) closed, 1 remembered)" in out
    # The second conversation's context holds the first one's summary and its open threads.
    context = out.split("(what the model read with your last message, each tier in its tag)")[-1]
    assert "<earlier_today>" in context and "(offline demo) Hi! I am a nurse in Lyon." in context
    assert "<unfinished_topics>" in context and "They asked: Should I wear the blue suit?" in context
    # And the profile: the facts post-processing learned, in the new conversation's first request.
    assert "<about_them>" in context and "- The user is a nurse in Lyon." in context
    assert "I remember: The user is a nurse in Lyon." in third
    assert "Earlier today: (offline demo) Hi! I am a nurse in Lyon." in third
    # /memory lists the facts, the profile first.
    listed = out.split("In your profile, which I read every time we talk:\n", 1)[1]
    facts = listed.split("you> ", 1)[0]
    assert "The user is a nurse in Lyon.\n   ↳ you said on " in facts  # with the line it comes from
    assert ": “Hi! I am a nurse in Lyon. My sister is called Ana.”\n" in facts
    assert "There is no /timeline here." in out
    # Commands never reach the model or the transcript.
    assert user_messages(database) == [*FIRST_SESSION, "hello again"]

    # After a restart the clock follows the stored last message, so the /wait is not undone.
    clock_after_wait = clock.now()
    again = io.StringIO()
    restarted = morning_clock()  # the same day as before the restart
    await run_chat(settings, user_name="ana", stdin=io.StringIO("still me\n"), stdout=again, clock=restarted)
    assert again.getvalue().startswith("Welcome back, ana.")
    assert restarted.now() >= clock_after_wait - timedelta(seconds=1)
    assert "(new session)" not in again.getvalue()


async def test_the_offline_user_commands_work_in_the_chat(tmp_path: Path) -> None:
    database = tmp_path / "chat.db"
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{database}", model="demo", summary_model="demo", _env_file=None
    )
    lines = [
        "I have a cat.",
        "/timezone Lisbon",
        "/language fr",
        f"/export {tmp_path / 'out'}",
        "/forget",
        "/forget confirm",
        "/memory",
    ]
    stdout = io.StringIO()
    await run_chat(settings, user_name="bo", stdin=io.StringIO("\n".join(lines) + "\n"), stdout=stdout)
    out = stdout.getvalue()
    assert "Got it: your time zone is now Europe/Lisbon." in out
    assert "Got it: I'll search your messages as fr." in out
    exported = tmp_path / "out" / "nikita-export.json"
    assert f"Everything I have stored about you: {exported}" in out
    assert "I have a cat." in exported.read_text(encoding="utf-8")
    assert "It cannot be undone. Are you sure? Type /forget confirm." in out
    assert "I've forgotten everything about you" in out
    assert "Nothing left open between us." in out and user_messages(database) == []


@pytest.mark.process
def test_a_newcomer_sees_the_memory_work_and_nothing_but_the_conversation(tmp_path: Path) -> None:
    # As the README has it: a fresh folder, no key, no .env, the default log level, and stderr a
    # terminal (where libraries greet a first run; neither pytest's nor CI's variables to hush them).
    hushing = {"PYTEST_VERSION", "CI", "PYDANTIC_AI_NO_BANNER"}
    unset = {"ANTHROPIC_API_KEY", "MODEL", "SUMMARY_MODEL", "LOG_LEVEL", "DATABASE_URL", *hushing}
    env = {key: value for key, value in os.environ.items() if key not in unset}
    env["PYTHONPATH"] = str(ROOT)
    script = [*FIRST_SESSION, "/wait 20", "hello again", "/context", "/memory", "/quit"]
    terminal, stderr = pty.openpty()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "bot", "chat", "--user", "ana", "--model", "demo"],
            input="\n".join(script) + "\n",
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            cwd=tmp_path,
            env=env,
            timeout=120,
            check=False,
        )
        os.close(stderr)
        errors = _drain(terminal)
    finally:
        os.close(terminal)
    assert done.returncode == 0, errors
    assert errors == ""
    out = done.stdout
    assert out.startswith("Nice to meet you, ana. Type a message, or /help for the commands.\n")
    assert len(answers(out)) == 3
    context = out.split("each tier in its tag)")[-1]
    assert "(offline demo) Hi! I am a nurse in Lyon." in context
    assert "They asked: Should I wear the blue suit?" in context
    # The profile: what the first session taught, in the new conversation's first prompt, without a graph.
    about = context.split("<about_them>", 1)[1].split("</about_them>", 1)[0]
    assert "- The user is a nurse in Lyon." in about
    assert "Here's what I remember about you." in out
    database = tmp_path / "data" / "nikita.db"
    assert user_messages(database) == [*FIRST_SESSION, "hello again"]
    # One chat model call per message: /context and /memory made none.
    with sqlite3.connect(database) as db:
        [(chat_calls,)] = db.execute("SELECT sum(calls) FROM model_usage WHERE kind = 'chat'").fetchall()
    assert chat_calls == 3


async def test_the_readme_offline_lines_show_what_they_say(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("--model demo\n```\n\n```text\n", 1)[1].split("```", 1)[0]
    lines = [line.removeprefix("you> ").split("  #", 1)[0].strip() for line in block.splitlines()]
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{tmp_path}/readme.db",
        model="demo",
        summary_model="demo",
        _env_file=None,
    )
    stdout = io.StringIO()
    await run_chat(
        settings,
        user_name="ana",
        stdin=io.StringIO("\n".join(lines) + "\n"),
        stdout=stdout,
        clock=morning_clock(),
    )
    out = stdout.getvalue()
    first, again, searched = answers(out)
    assert first.startswith("(offline demo) Noted: 'I am a nurse in Lyon.")
    assert again.startswith("(offline demo) Noted: 'hello again'. Earlier today: (offline demo) I am a nurse")
    assert "<earlier_today>" in out and "<unfinished_topics>" in out  # /context
    assert searched.startswith("(offline demo) I found this (") and "nurse in Lyon" in searched


@pytest.mark.process
def test_a_new_name_is_onboarded_as_on_telegram_when_onboarding_is_on(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key not in {"MODEL", "DATABASE_URL"}}
    env |= {"PYTHONPATH": str(ROOT), "ONBOARDING_ENABLED": "true"}
    script = ["I am Sam, in Lisbon", "/skip", "hello", "/quit"]
    done = subprocess.run(
        [sys.executable, "-m", "bot", "chat", "--user", "sam", "--model", "demo"],
        input="\n".join(script) + "\n",
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
        check=True,
    )
    lines = done.stdout.splitlines()
    # Opening the chat is Telegram's /start: the onboarding agent speaks first (the demo model notes it).
    assert lines[:2] == [
        "Nice to meet you, sam. Type a message, or /help for the commands.",
        "nikita> (offline demo) Noted: '/start'.",
    ]
    assert lines[2:5] == [
        "you> nikita> (offline demo) Noted: 'I am Sam, in Lisbon'.",
        "you> No problem, sam. Let's just talk! (/timezone sets where you are.)",
        "you> nikita (new session)> (offline demo) Noted: 'hello'.",
    ]
    with sqlite3.connect(tmp_path / "data" / "nikita.db") as db:
        rows = db.execute("SELECT role, kind, content FROM transcript_messages ORDER BY id").fetchall()
        [(name, status)] = db.execute("SELECT name, onboarding_status FROM users").fetchall()
    # Onboarding's exchange is kept apart from the conversation, which begins after /skip.
    assert [(role, kind) for role, kind, _ in rows] == [
        ("user", "onboarding"),
        ("assistant", "onboarding"),
        ("user", "onboarding"),
        ("assistant", "onboarding"),
        ("user", "text"),
        ("assistant", "text"),
    ]
    assert (name, status) == ("sam", "complete")
