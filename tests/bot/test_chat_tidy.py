"""The terminal chat's `/wait` tidies what the offline demo learned: a move leaves one place current."""

from __future__ import annotations

import io
import sqlite3
from pathlib import Path

from agent.core.clock import ShiftedClock
from agent.core.settings import Settings
from bot.cli.chat import run_chat


async def test_after_wait_the_demo_knows_they_moved_from_lisbon_to_porto(tmp_path: Path) -> None:
    database = tmp_path / "chat.db"
    settings = Settings(
        database_url=f"sqlite+aiosqlite:///{database}", model="demo", summary_model="demo", _env_file=None
    )
    lines = ["I live in Lisbon.", "/wait 20", "Guess what! I moved to Porto.", "/wait 20", "/quit"]

    await run_chat(
        settings,
        user_name="ana",
        stdin=io.StringIO("\n".join(lines) + "\n"),
        stdout=io.StringIO(),
        clock=ShiftedClock(),
    )

    with sqlite3.connect(database) as db:
        facts = dict(db.execute("SELECT content, id FROM user_facts WHERE invalidated_at IS NULL").fetchall())
        superseded = db.execute(
            "SELECT content, superseded_by FROM user_facts WHERE invalidated_at IS NOT NULL"
        ).fetchall()
    assert list(facts) == ["The user moved to Porto."]
    assert superseded == [("The user lives in Lisbon.", facts["The user moved to Porto."])]
