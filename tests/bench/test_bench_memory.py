"""The memory bench measures a real `bot run`: positive idle and peak RSS, every message answered."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench.common import scratch_database
from bench.delivery_harness import echo
from bench.fakes.anthropic_api import FakeAnthropic
from bench.fakes.telegram_api import FakeTelegram
from bench.memory import descendants, measure, rss_bytes, tree_rss

pytestmark = [pytest.mark.slow, pytest.mark.process]


def test_tree_rss_counts_the_children_of_a_process() -> None:
    script = (
        "import subprocess, sys, time; "
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)']); time.sleep(30)"
    )
    parent = subprocess.Popen([sys.executable, "-c", script])
    try:
        children: list[int] = []
        for _ in range(100):
            if children := descendants(parent.pid):
                break
            time.sleep(0.05)  # the child starts in another process: nothing here to await
        assert len(children) == 1
        # A process starting up grows between two readings: compare readings taken while both sizes held.
        for _ in range(100):
            apart = rss_bytes(parent.pid) + rss_bytes(children[0])
            together = tree_rss(parent.pid)
            if apart == rss_bytes(parent.pid) + rss_bytes(children[0]):
                break
            time.sleep(0.05)
        assert together == apart > rss_bytes(parent.pid)
    finally:
        for pid in descendants(parent.pid):
            subprocess.run(["kill", str(pid)], check=False)
        parent.kill()
        parent.wait()


async def test_measure_reports_idle_and_peak_rss_of_a_bot_answering_messages(tmp_path: Path) -> None:
    with FakeAnthropic(responder=echo) as model:
        async with scratch_database("sqlite") as url, FakeTelegram(token="123:ABC") as tg:
            assert url is not None
            found = await measure(
                tg=tg, model_url=model.base_url, database_url=url, folder=tmp_path, users=2, messages=2
            )

    assert found.answered == found.sent == 4
    assert found.idle > 50_000_000  # a Python process with the bot's libraries and the model loaded
    assert found.peak >= found.idle * 0.8  # sampled under load; the allocator may have given some back
    assert found.graph == "none" and found.server == 0
