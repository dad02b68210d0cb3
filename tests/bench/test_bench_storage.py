"""`bench storage` measures bytes at rest per message before and after the retention job, from real
turns or from the generator that writes recorded turns again."""

from __future__ import annotations

import re

import pytest

from bench.storage import run_storage_bench


@pytest.mark.parametrize("turns", [False, True], ids=["generated", "turns"])
async def test_the_storage_benchmark_measures_before_and_after_retention(turns: bool) -> None:
    lines = await run_storage_bench(
        people=2, days=2, retention_days=1, backends=("sqlite",), top=40, turns=turns, rebuild=True
    )

    summary = lines[lines.index("  sqlite:") + 1]
    found = re.search(r"([\d,]+) messages; ([\d,]+) B/message before retention, ([\d,]+) after", summary)
    assert found is not None
    messages, before, after = (float(n.replace(",", "")) for n in found.groups())
    assert messages == 2 * 2 * 7
    assert "'snapshots_deleted': " in summary and "'snapshots_deleted': 0" not in summary
    assert 0 < after < before  # the job deleted and slimmed snapshots
    assert [line.split(":")[0] for line in lines if line.startswith("    day ")] == ["    day 1", "    day 2"]
    rows = {
        line.split()[0]: [float(n) for n in line.split()[1:]]
        for line in lines
        if line.startswith("    ") and len(line.split()) == 3 and not line.startswith("    table")
    }

    assert rows["generated_prompts"][1] < rows["generated_prompts"][0]
