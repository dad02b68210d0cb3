"""`python -m bench delivery --quick` runs end to end and prints its figures."""

from __future__ import annotations

import re

import pytest

from bench.__main__ import main

pytestmark = [pytest.mark.slow, pytest.mark.process]


def test_bench_delivery_prints_losses_latency_burst_and_overhead(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOG_LEVEL", "WARNING")
    assert main(["delivery", "--quick"]) == 0

    out = capsys.readouterr().out
    rows = re.findall(r"sent (\d+)  lost (\d+)  unanswered (\d+)  answered twice (\d+)", out)
    assert len(rows) == 2, out
    # Without a crash nothing may be lost, unanswered or repeated.
    assert [tuple(map(int, row[1:])) for row in rows] == [(0, 0, 0)] * 2, out
    assert "other users' reply latency during one user's burst of 20" in out
    assert re.search(r"sqlite +added before the reply: p50 [+-][\d.]+ ms  p95 [+-][\d.]+ ms", out), out
