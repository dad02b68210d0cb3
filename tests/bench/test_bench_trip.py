"""`bench trip` counts a real message's way: the modules it ran through and what it asked the database."""

from __future__ import annotations

import pytest

from bench.trip import measure_trip


async def test_the_counted_message_runs_from_the_webhook_through_the_turn_to_the_send(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PTB_TIMEDELTA", "1")  # python-telegram-bot's timedelta values, without its warning
    trip = await measure_trip("sqlite")
    assert trip is not None
    # The way a reader follows: the route first, the turn in the middle, the send at the end.
    assert trip.modules[0] == "bot/web/app.py"
    assert trip.modules.index("agent/turn/service.py") < trip.modules.index("bot/delivery/formatting.py")
    assert {"db/inbox.py", "agent/chat/agent.py"} <= set(trip.modules)
    # Only product modules, and the arrows between them cross folders (bot -> agent -> db at least).
    assert all(m.split("/")[0] in {"bot", "agent", "db", "jobs"} for m in trip.modules)
    assert trip.folder_moves() >= 2
    # The message and its answer were stored: two transcript rows in this message's statements.
    # (each line: its connection, the statement, the function that asked for it).
    statements = [line.split(maxsplit=1)[1] for line in trip.log if not line.startswith("BEGIN")]
    assert sum(1 for s in statements if s.startswith("INSERT INTO transcript_messages")) == 2
    assert trip.transactions >= 1
