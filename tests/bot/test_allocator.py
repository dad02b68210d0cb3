"""glibc's allocator as the bot sets it: big blocks freed go back to the system, whatever came before."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.process

ROOT = Path(__file__).resolve().parents[2]

# Many 1 MB buffers, each followed by a small block that outlives it, after one 4 MB block was freed
# (glibc then raises its mmap threshold to 4 MB, so the 1 MB buffers land in the heap between the
# small blocks). Prints RSS growth in MB while they live and after they are freed.
PROBE = """
import re, sys
def rss():
    return int(re.search(r"VmRSS:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) // 1024
if sys.argv[1] == "tuned":
    from bot.allocator import tune_allocator
    assert tune_allocator()
first = bytearray(4 * 1024 * 1024)
del first
base = rss()
big, small = [], []
for _ in range(200):
    big.append(bytearray(1024 * 1024))
    small.append(bytes(2048))
held = rss() - base
del big
print(held, rss() - base)
"""


def _probe(mode: str) -> tuple[int, int]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    return int(out[0]), int(out[1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="needs /proc to read RSS")
def test_freed_buffers_go_back_to_the_system_once_the_allocator_is_tuned() -> None:
    held, kept = _probe("plain")
    if kept < held // 2:
        pytest.skip(f"this C library returns freed blocks by itself (held {held} MB, kept {kept} MB)")
    tuned_held, tuned_kept = _probe("tuned")
    assert tuned_held >= 150  # the buffers really were resident
    assert tuned_kept < 20, f"tuned: {tuned_kept} MB of {tuned_held} MB still resident after freeing"
    assert kept > 150  # and glibc's defaults keep them: what the tuning is for
