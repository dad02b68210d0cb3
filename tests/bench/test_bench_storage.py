"""`bench storage` measures bytes at rest per message before and after the retention job."""

from __future__ import annotations

import re

from bench.storage import run_storage_bench


async def test_the_storage_benchmark_measures_before_and_after_retention() -> None:
    lines = await run_storage_bench(people=1, days=2, retention_days=1, backends=("sqlite",), top=40)

    summary = next(line for line in lines if line.startswith("  sqlite:"))
    found = re.search(r"([\d,]+) B/message before retention, ([\d,]+) after", summary)
    assert found is not None
    before, after = (float(n.replace(",", "")) for n in found.groups())
    assert "'snapshots_deleted': " in summary and "'snapshots_deleted': 0" not in summary
    assert 0 < after < before  # the job deleted and slimmed snapshots
    rows = {
        line.split()[0]: [float(n) for n in line.split()[1:]] for line in lines[3:] if line.startswith("    ")
    }

    assert rows["generated_prompts"][1] < rows["generated_prompts"][0]
