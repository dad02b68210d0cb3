"""The child process that parses one document: `python -m agent.chat.parse_child KIND ...`.

It lowers its own priority and caps its address space and CPU time before it imports the
parser, reads the file from stdin and writes one JSON object to stdout: {"text": ...} or
{"error": "unreadable" | "memory", "detail": ...}. The parent (agent/chat/documents.py) owns the
deadline and kills it past it.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys

MEMORY_EXIT = 3  # the memory ceiling was hit where not even the JSON answer could be written


def _limit(memory_mb: int, cpu_seconds: int) -> None:
    # The lowest priority: on a busy machine the bot's turns get the CPU before a parse does.
    os.nice(19)
    address_space = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))
    # A backstop for the parent's deadline: the kernel stops a child whose parent could not.
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))


def _parse(kind: str, data: bytes, *, max_pages: int, max_chars: int) -> dict[str, str]:
    from agent.chat.pdf import pdf_text
    from agent.core.errors import UnreadablePdfError

    if kind != "pdf":
        return {"error": "unreadable", "detail": f"no parser for {kind!r}"}
    try:
        return {"text": pdf_text(data, max_pages=max_pages, max_chars=max_chars)}
    except UnreadablePdfError as exc:
        if isinstance(exc.__cause__, MemoryError):
            return {"error": "memory", "detail": "the memory ceiling was reached"}
        return {"error": "unreadable", "detail": str(exc)}


def main(argv: list[str] | None = None) -> int:
    """Parse stdin under the limits in argv; the answer goes to stdout."""
    parser = argparse.ArgumentParser(prog="python -m agent.chat.parse_child")
    parser.add_argument("kind", choices=["pdf"])
    parser.add_argument("--max-pages", type=int, required=True)
    parser.add_argument("--max-chars", type=int, required=True)
    parser.add_argument("--memory-mb", type=int, required=True)
    parser.add_argument("--cpu-seconds", type=int, required=True)
    args = parser.parse_args(argv)
    data = sys.stdin.buffer.read()
    _limit(args.memory_mb, args.cpu_seconds)
    try:
        answer = _parse(args.kind, data, max_pages=args.max_pages, max_chars=args.max_chars)
    except MemoryError:
        answer = {"error": "memory", "detail": "the memory ceiling was reached"}
    try:
        sys.stdout.write(json.dumps(answer))
        sys.stdout.flush()
    except MemoryError:
        return MEMORY_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main())
