"""Run a Python snippet in a child process that cannot reach the network (for offline guarantees)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

# Prepended to every snippet: any network socket use raises and is recorded in `touched`. Local
# (AF_UNIX) socket pairs stay allowed: asyncio's event loop wakes itself up through one.
AUDIT_HOOK = """
import socket as _socket
import sys

touched = []

def no_network(event, args):
    if not event.startswith("socket."):
        return
    if event == "socket.__new__" and len(args) > 1 and args[1] == _socket.AF_UNIX:
        return
    touched.append(event)
    raise OSError(f"network disabled in this test: {event}")

sys.addaudithook(no_network)
"""

ISOLATIONS = ["audit-hook", "network-namespace"]


def run_offline(script: str, isolation: str, cwd: Path) -> str:
    """Run `script` (after the audit hook) offline; returns its stdout, fails the test on an error.

    `network-namespace` also runs it in a private network namespace without interfaces, so native
    code cannot reach out either; it skips where `unshare -n` is not permitted.
    """
    command = [sys.executable, "-c", AUDIT_HOOK + script]
    if isolation == "network-namespace":
        unshare = shutil.which("unshare")
        if unshare is None or subprocess.run([unshare, "-n", "true"], check=False).returncode != 0:
            pytest.skip("unshare -n is not permitted here")
        command = [unshare, "-n", *command]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parent.parent),
    }
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout
