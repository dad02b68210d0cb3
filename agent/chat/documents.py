"""Documents parsed out of process: a deadline, a memory ceiling and a few at a time.

A parser on a stranger's file is the one place where a few KB can buy minutes of CPU or hundreds
of MB (thirty pages sharing one compressed stream of text operators). So each parse runs in its
own short-lived child (`python -m agent.chat.parse_child`), started by asyncio's subprocess support
(fork and exec at once, no Python code in between: safe beside the event loop and its threads).
The child caps its own address space (RLIMIT_AS) and CPU time (RLIMIT_CPU, a backstop); the parent
kills it at the deadline and reaps it. At most `concurrency` children run; the others wait on an
asyncio semaphore, so waiting blocks neither the event loop nor any thread pool.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent.chat.parse_child import MEMORY_EXIT
from agent.core.errors import DocumentTooHeavyError, UnreadablePdfError
from agent.core.settings import Settings

logger = logging.getLogger(__name__)

# The folder that holds the `agent` package: the child's `-m` finds it there whatever our cwd is.
PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class DocumentParser:
    """Runs document parsers in child processes under a deadline and a memory ceiling."""

    deadline_seconds: float
    memory_mb: int
    concurrency: int
    _slots: asyncio.Semaphore = field(init=False, repr=False)
    _children: set[asyncio.subprocess.Process] = field(default_factory=set, init=False, repr=False)

    def __post_init__(self) -> None:
        self._slots = asyncio.Semaphore(self.concurrency)

    @classmethod
    def from_settings(cls, settings: Settings) -> DocumentParser:
        """The parser the DOCUMENT_PARSE_* settings describe."""
        return cls(
            deadline_seconds=settings.document_parse_seconds,
            memory_mb=settings.document_parse_memory_mb,
            concurrency=settings.document_parse_concurrency,
        )

    @property
    def running(self) -> int:
        """Children alive right now (parsing, or being reaped)."""
        return len(self._children)

    async def pdf_text(self, data: bytes, *, max_pages: int, max_chars: int) -> str:
        """The text of a PDF (agent/chat/pdf.py's `pdf_text`), read in a child under the limits.

        Raises UnreadablePdfError for a file with no text to give, DocumentTooHeavyError for one
        over the deadline or the memory ceiling.
        """
        args = ["pdf", f"--max-pages={max_pages}", f"--max-chars={max_chars}"]
        async with self._slots:
            return await self._run(args, data)

    async def _run(self, args: list[str], data: bytes) -> str:
        cpu_seconds = math.ceil(self.deadline_seconds) + 1
        started = time.perf_counter()
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "agent.chat.parse_child",
            *args,
            f"--memory-mb={self.memory_mb}",
            f"--cpu-seconds={cpu_seconds}",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
            cwd=PACKAGE_ROOT,
        )
        self._children.add(child)
        try:
            out, _ = await asyncio.wait_for(child.communicate(data), self.deadline_seconds)
        except TimeoutError:
            limit = f"not parsed within {self.deadline_seconds:g} s"
            raise DocumentTooHeavyError("deadline", limit) from None
        finally:
            await self._reap(child)
        elapsed = time.perf_counter() - started
        return self._answer(child.returncode, out, elapsed)

    async def _reap(self, child: asyncio.subprocess.Process) -> None:
        # Shielded: a cancelled turn must still not leave a parser running behind it.
        try:
            if child.returncode is None:
                child.kill()
            await asyncio.shield(child.wait())
        except ProcessLookupError:
            pass
        finally:
            if child.returncode is not None:
                self._children.discard(child)

    def _answer(self, returncode: int | None, out: bytes, elapsed: float) -> str:
        extra = {"returncode": returncode, "elapsed_ms": round(elapsed * 1000)}
        try:
            answer = json.loads(out) if returncode == 0 else {}
        except ValueError:
            answer = {}
        if "text" in answer:
            return str(answer["text"])
        error, detail = answer.get("error"), str(answer.get("detail", ""))
        logger.info("document not parsed", extra={**extra, "error": error or "crashed"})
        if error == "unreadable":
            raise UnreadablePdfError(detail)
        if error == "memory" or returncode == MEMORY_EXIT:
            raise DocumentTooHeavyError("memory", f"over {self.memory_mb} MB")
        # Killed by the CPU backstop (SIGXCPU), out of memory before it could answer, or crashed.
        raise DocumentTooHeavyError("killed", f"the parser exited with {returncode}")

    async def close(self) -> None:
        """Kill and reap every child still running (at shutdown)."""
        for child in list(self._children):
            await self._reap(child)
