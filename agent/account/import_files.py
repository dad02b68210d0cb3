"""Opening another assistant's export safely: the JSON inside a zip or alone, as a stream of items.

A zip is never extracted to disk: its entries' names are only compared (a zip with a name that
climbs out, `..` or absolute, is refused whole), and the conversations entry is read through a
running cap on its uncompressed bytes and on its ratio to its compressed size, counted as read
whatever the headers claim, so a zip bomb stops at the cap. The JSON is read as parser events
(ijson) and built into the top-level array's items one at a time, its depth counted from the events
(no recursion, a cap on nesting). Every refusal is an `ImportFileError` whose text is the reason as
the person is told it.
"""

from __future__ import annotations

import contextlib
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO, Any, Protocol

import ijson  # type: ignore[import-untyped]

from agent.core.errors import NikitaError

# The entry of the export's zip that holds the conversations (both assistants name it so).
CONVERSATIONS_ENTRY = "conversations.json"
# An uncompressed size below this is never refused for its ratio alone (a tiny file compresses well).
RATIO_FLOOR_BYTES = 16 * 1024 * 1024
_READ_CHUNK = 256 * 1024
_BOM = b"\xef\xbb\xbf"


class ImportFileError(NikitaError, ValueError):
    """The file cannot be imported; the message is the reason, as the person is told it."""


@dataclass(frozen=True)
class ReadLimits:
    """How much of a file is read before it is refused (IMPORT_* settings)."""

    max_bytes: int = 2_000_000_000
    max_ratio: float = 100.0
    max_depth: int = 64


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Capped:
    """A binary stream that refuses to yield more than `cap` bytes (counted as read, not as declared)."""

    def __init__(self, raw: _Readable, cap: int, reason: str) -> None:
        self.raw = raw
        self.cap = cap
        self.reason = reason
        self.count = 0

    def read(self, size: int = -1) -> bytes:
        data = self.raw.read(_READ_CHUNK if size is None or size < 0 else size)
        self.count += len(data)
        if self.count > self.cap:
            raise ImportFileError(self.reason)
        return data


@contextlib.contextmanager
def open_json(path: Path, limits: ReadLimits) -> Iterator[_Capped]:
    """The conversations' JSON of an export file (a zip's entry, or the file), capped, closed with
    everything under it."""
    too_big = f"The conversations are larger than this bot imports ({limits.max_bytes:,} bytes)."
    try:
        is_zip = zipfile.is_zipfile(path)
    except OSError as exc:
        raise ImportFileError("The file could not be read.") from exc
    with contextlib.ExitStack() as opened:
        if not is_zip:
            file = opened.enter_context(path.open("rb"))
            head = file.read(64)
            bom = len(_BOM) if head.startswith(_BOM) else 0
            file.seek(bom)
            if head[bom:].lstrip()[:1] not in (b"[", b"{"):
                raise ImportFileError(
                    "This is neither a zip nor a JSON file: send the export as you downloaded it."
                )
            yield _Capped(file, limits.max_bytes, too_big)
            return
        try:
            archive = opened.enter_context(zipfile.ZipFile(path))
            entry = _conversations_entry(archive)
            cap = min(limits.max_bytes, max(RATIO_FLOOR_BYTES, int(entry.compress_size * limits.max_ratio)))
            if entry.file_size > cap:
                raise ImportFileError(_bomb(limits))
            raw = opened.enter_context(archive.open(entry))
        except (zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError) as exc:
            # RuntimeError: an encrypted entry; NotImplementedError: a compression zipfile lacks.
            raise ImportFileError("The zip could not be opened (damaged or encrypted).") from exc
        reason = too_big if cap == limits.max_bytes else _bomb(limits)
        yield _Capped(_ZipErrors(raw), cap, reason)


class _ZipErrors:
    """A zip entry's stream whose decompression and CRC failures are the file's fault, said so."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw

    def read(self, size: int = -1) -> bytes:
        try:
            return self.raw.read(size)
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise ImportFileError("The zip is damaged: its conversations could not be read.") from exc


def _bomb(limits: ReadLimits) -> str:
    return (
        "The zip unpacks to far more than it holds (over "
        f"{limits.max_ratio:g} times its size, or over {limits.max_bytes:,} bytes): it is not imported."
    )


def _safe_name(name: str) -> bool:
    parts = PurePosixPath(name.replace("\\", "/")).parts
    return not name.startswith(("/", "\\")) and ".." not in parts and not (parts and ":" in parts[0])


def _conversations_entry(archive: zipfile.ZipFile) -> zipfile.ZipInfo:
    """The zip's conversations.json (the shallowest); the zip refused if any name climbs out."""
    entries = archive.infolist()
    if any(not _safe_name(entry.filename) for entry in entries):
        raise ImportFileError("The zip has files whose paths climb out of it: it is not imported.")
    found = [e for e in entries if PurePosixPath(e.filename).name == CONVERSATIONS_ENTRY and not e.is_dir()]
    if not found:
        raise ImportFileError(
            "The zip has no conversations.json: send the export ChatGPT or Claude sent you, as it came."
        )
    return min(found, key=lambda entry: entry.filename.count("/"))


def json_items(stream: Any, max_depth: int) -> Iterator[Any]:
    """The items of the top-level JSON array, built one at a time from the parser's events."""
    events = ijson.basic_parse(stream, use_float=True)
    try:
        first = next(events, None)
        if first is None:
            raise ImportFileError("The file is empty.")
        if first[0] != "start_array":
            raise ImportFileError("This file is neither a ChatGPT nor a Claude export.")
        stack: list[Any] = []
        keys: list[Any] = []
        for event, value in events:
            if event == "map_key":
                keys[-1] = value
                continue
            if event == "start_map" or event == "start_array":
                if len(stack) >= max_depth:
                    raise ImportFileError(
                        f"The JSON is nested more than {max_depth} levels deep: it is not an export."
                    )
                container: Any = {} if event == "start_map" else []
                if stack:
                    parent = stack[-1]
                    if keys[-1] is _LIST:
                        parent.append(container)
                    else:
                        parent[keys[-1]] = container
                stack.append(container)
                keys.append(None if event == "start_map" else _LIST)
                continue
            if event == "end_map" or event == "end_array":
                if not stack:  # the end of the top-level array
                    break
                done = stack.pop()
                keys.pop()
                if not stack:
                    yield done
                continue
            if not stack:
                yield value
            elif keys[-1] is _LIST:
                stack[-1].append(value)
            else:
                stack[-1][keys[-1]] = value
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        # yajl says "premature EOF" or "parse error" through the same exception type.
        raise ImportFileError("The JSON is broken or cut short: the file is damaged or incomplete.") from exc


_LIST = object()
