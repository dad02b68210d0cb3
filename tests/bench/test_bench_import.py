"""`bench import --quick`: both formats imported by the real command, with every figure printed."""

from __future__ import annotations

import re

import pytest

from agent.core.settings import Settings
from bench.imports import run_import_bench

pytestmark = [pytest.mark.slow, pytest.mark.process]


async def test_bench_import_quick_prints_every_figure_for_both_formats(
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = Settings(_env_file=None, embedder="none")  # type: ignore[call-arg]
    await run_import_bench(settings, quick=True)
    out = capsys.readouterr().out
    for assistant in ("ChatGPT", "Claude"):
        assert f"{assistant}: 100 conversations, 2,000 messages" in out
    assert len(re.findall(r"stored and searchable by full text: [\d,]+ messages/s", out)) == 2
    assert len(re.findall(r"peak RSS of the import process: [1-9]\d* MB", out)) == 2
    assert len(re.findall(r"first message searchable -?[\d.]+ s after storing began", out)) == 2
    assert len(re.findall(r"learning from it: 130 model calls", out)) == 2
