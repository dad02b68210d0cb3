"""Anthropic's prompt cache, as the fake Messages API models it from the documented rules.

The prompt is one sequence of blocks: each tool definition, then each system block, then each content block
of each message (a string is one text block). A block with `cache_control: {"type": "ephemeral"}` and an
optional `"ttl": "5m" | "1h"` (default 5m) is a breakpoint. A top-level `cache_control` is automatic caching:
a breakpoint on the last cacheable block of the messages (thinking blocks are not cacheable), one with that
block's own breakpoint when it has one. More than 4 breakpoints, or a 1h breakpoint after a 5m one, is a 400
with the real API's wording.

- Key: the model and the canonical JSON of every block up to and including the position, `cache_control`
  left out. The fake is one organisation: every request to it shares the one cache.
- Writes: a breakpoint writes an entry for its prefix when the prefix reaches the model's minimum cacheable
  length (`min_cache_tokens`: 4096 for Opus 4.5+ and Haiku 4.5+, 2048 for older Haiku, else 1024); shorter
  prefixes are neither cached nor counted as written.
- Reads: from each breakpoint the cache looks back over 20 positions (the breakpoint's own and the 19 before
  it) for the longest prefix with a live entry; the hit is the longest over all breakpoints. Tokens up to the
  hit are read; tokens from the hit to the last breakpoint that writes are written, each stretch at the TTL of
  the breakpoint ending it; the rest is uncached input. Tokens are `estimate_tokens` per block, so read +
  written + uncached is the request's total, the figure count_tokens answers.
- Lifetimes: 5 minutes or 1 hour from the last write or read, on an injectable clock returning seconds. A read
  refreshes, for their own TTLs, the hit and the shorter live entries of the same prefix. An entry is readable
  once the request writing it is answered (the real API: once its response begins).
Every request that gets a reply is recorded as a `CacheUse` in `PromptCache.uses`, in the order answered; a
refused request (400, or a scripted error) neither reads nor writes.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

Json = dict[str, Any]
Ttl = Literal["5m", "1h"]

MAX_BREAKPOINTS = 4
LOOKBACK = 20  # prefix positions checked per breakpoint, the breakpoint's own included
LIFETIME: dict[Ttl, float] = {"5m": 300.0, "1h": 3600.0}
# (model family, from version, minimum cacheable prefix in tokens): the last matching row wins; default 1024.
MINIMUMS: tuple[tuple[str, tuple[int, int], int], ...] = (
    ("haiku", (0, 0), 2048),
    ("haiku", (4, 5), 4096),
    ("opus", (4, 5), 4096),
)
_NOT_CACHEABLE = frozenset({"thinking", "redacted_thinking"})
_TTL_ORDER = (
    "a ttl='1h' cache_control block must not come after a ttl='5m' cache_control block. Note that blocks are"
    " processed in the following order: `tools`, `system`, `messages`."
)


def min_cache_tokens(model: str) -> int:
    """The shortest prefix (in tokens) `model` caches, from the model name's family and version."""
    found = re.search(r"(opus|sonnet|haiku)-(\d)(?!\d)(?:-(\d)(?!\d))?", model)  # not a date
    legacy = re.search(r"claude-(\d)(?:-(\d))?-(opus|sonnet|haiku)", model)
    if found:
        family, version = found[1], (int(found[2]), int(found[3] or 0))
    elif legacy:
        family, version = legacy[3], (int(legacy[1]), int(legacy[2] or 0))
    else:
        return 1024
    rows = [tokens for name, since, tokens in MINIMUMS if name == family and version >= since]
    return rows[-1] if rows else 1024


def estimate_tokens(payload: object) -> int:
    """A rough token count (4 characters a token, at least 1) of any JSON-able payload."""
    return max(1, len(json.dumps(payload, ensure_ascii=False)) // 4)


@dataclass(frozen=True)
class Breakpoint:
    """A cache breakpoint of a request: where it is, its TTL and the tokens of the prefix it ends."""

    path: str  # e.g. "tools.2", "system.0", "messages.3.content.1"
    ttl: Ttl
    tokens: int
    automatic: bool = False


@dataclass(frozen=True)
class CacheUse:
    """What the cache did for one request: its breakpoints, the tokens read, written and left uncached."""

    model: str
    breakpoints: tuple[Breakpoint, ...]
    read: int
    written_5m: int
    written_1h: int
    uncached: int

    @property
    def written(self) -> int:
        """Tokens written, at either TTL."""
        return self.written_5m + self.written_1h

    @property
    def total(self) -> int:
        """The request's input tokens, cached or not."""
        return self.read + self.written + self.uncached

    def usage(self) -> Json:
        """The input side of the Messages API's `usage` object."""
        return {
            "input_tokens": self.uncached,
            "cache_creation_input_tokens": self.written,
            "cache_read_input_tokens": self.read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": self.written_5m,
                "ephemeral_1h_input_tokens": self.written_1h,
            },
        }


class CacheRejected(ValueError):
    """A request the real API rejects for its cache_control (its message is the API's)."""


@dataclass(frozen=True)
class _Block:
    path: str
    key_json: str  # canonical JSON, cache_control left out
    tokens: int
    cache_control: object  # None when the block is no breakpoint
    cacheable: bool


def _bare(block: Json) -> Json:
    return {k: v for k, v in block.items() if k != "cache_control"}


def _block(path: str, section: Json, block: Json, cacheable: bool = True) -> _Block:
    bare = _bare(block)
    key_json = json.dumps(section | {"block": bare}, ensure_ascii=False, sort_keys=True)
    return _Block(path, key_json, estimate_tokens(bare), block.get("cache_control"), cacheable)


def _blocks(body: Json) -> list[_Block]:
    """The request's prompt as blocks in cache order: tools, system, messages (the body is already valid)."""
    blocks = [_block(f"tools.{i}", {"in": "tools"}, tool) for i, tool in enumerate(body.get("tools") or [])]
    system = body.get("system") or []
    if isinstance(system, str):
        system = [{"type": "text", "text": system}]
    blocks += [_block(f"system.{i}", {"in": "system"}, block) for i, block in enumerate(system)]
    for i, message in enumerate(body["messages"]):
        content = message["content"]
        content = [{"type": "text", "text": content}] if isinstance(content, str) and content else content
        for j, block in enumerate(content if isinstance(content, list) else []):
            cacheable = block.get("type") not in _NOT_CACHEABLE
            blocks.append(_block(f"messages.{i}.content.{j}", {"role": message["role"]}, block, cacheable))
    return blocks


def _ttl(path: str, cache_control: object) -> Ttl:
    if not isinstance(cache_control, dict) or cache_control.get("type") != "ephemeral":
        raise CacheRejected(f"{path}.type: Input should be 'ephemeral'")
    ttl = cache_control.get("ttl", "5m")
    if ttl not in LIFETIME:
        raise CacheRejected(f"{path}.ttl: Input should be '5m' or '1h'")
    return "1h" if ttl == "1h" else "5m"


def breakpoints(body: Json, blocks: list[_Block]) -> list[tuple[int, Ttl, bool]]:
    """(position, TTL, automatic) of each breakpoint in order; `CacheRejected` where the real API says 400."""
    marks = [
        (i, _ttl(f"{block.path}.cache_control", block.cache_control), False)
        for i, block in enumerate(blocks)
        if block.cache_control is not None
    ]
    if (automatic := body.get("cache_control")) is not None:
        ttl = _ttl("cache_control", automatic)
        cacheable = [i for i, b in enumerate(blocks) if b.path.startswith("messages.") and b.cacheable]
        if cacheable and blocks[cacheable[-1]].cache_control is None:
            marks.append((cacheable[-1], ttl, True))  # the last message block: after every explicit one
    if len(marks) > MAX_BREAKPOINTS:
        raise CacheRejected(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {len(marks)}."
        )
    for (_, earlier, _), (position, ttl, automatic_mark) in itertools.pairwise(marks):
        if earlier == "5m" and ttl == "1h":
            where = "cache_control.ttl" if automatic_mark else f"{blocks[position].path}.cache_control.ttl"
            raise CacheRejected(f"{where}: {_TTL_ORDER}")
    return marks


def _checked(body: Json) -> tuple[list[_Block], list[tuple[int, Ttl, bool]]]:
    blocks = _blocks(body)
    return blocks, breakpoints(body, blocks)


def rejection(body: Json) -> str | None:
    """The 400 message the real API gives this (otherwise valid) body for its cache_control, or None."""
    try:
        _checked(body)
    except CacheRejected as exc:
        return str(exc)
    return None


def total_tokens(body: Json) -> int:
    """The input tokens of a (valid) request body, as the fake counts them."""
    return sum(block.tokens for block in _blocks(body))


@dataclass
class _Entry:
    ttl: Ttl
    expires: float


@dataclass
class PromptCache:
    """The entries of one fake server's cache; `use(body)` applies a request to them and says what it did."""

    clock: Callable[[], float] = time.monotonic
    min_tokens: int | None = None  # overrides the model's minimum cacheable length
    uses: list[CacheUse] = field(default_factory=list)
    _entries: dict[str, _Entry] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _kept: int = 0  # entries left after the last sweep of expired ones

    def use(self, body: Json) -> CacheUse:
        """Read and write the entries a valid request reaches; the `CacheUse` is recorded and returned."""
        blocks, marks = _checked(body)
        model = str(body["model"])
        minimum = self.min_tokens if self.min_tokens is not None else min_cache_tokens(model)
        keys, cumulative = _prefixes(model, blocks)
        with self._lock:
            now = self.clock()
            live = [(entry := self._entries.get(key)) is not None and entry.expires > now for key in keys]
            hit = max((_longest_live(live, position) for position, *_ in marks), default=-1)
            for position in (p for p in range(hit + 1) if live[p]):  # the hit and the shorter prefixes in it
                entry = self._entries[keys[position]]
                entry.expires = now + LIFETIME[entry.ttl]
            written: dict[Ttl, int] = {"5m": 0, "1h": 0}
            start = hit
            for position, ttl, _ in marks:
                if position <= hit or cumulative[position] < minimum:
                    continue
                written[ttl] += cumulative[position] - (cumulative[start] if start >= 0 else 0)
                self._entries[keys[position]] = _Entry(ttl, now + LIFETIME[ttl])
                start = position
            if len(self._entries) > 2 * self._kept + 1024:  # long benchmarks: sweep dead entries now and then
                self._entries = {k: e for k, e in self._entries.items() if e.expires > now}
                self._kept = len(self._entries)
            read = cumulative[hit] if hit >= 0 else 0
            total = cumulative[-1] if cumulative else 0
            use = CacheUse(
                model=model,
                breakpoints=tuple(
                    Breakpoint(blocks[p].path, ttl, cumulative[p], automatic) for p, ttl, automatic in marks
                ),
                read=read,
                written_5m=written["5m"],
                written_1h=written["1h"],
                uncached=total - read - written["5m"] - written["1h"],
            )
            self.uses.append(use)
        return use


def _longest_live(live: list[bool], position: int) -> int:
    """The longest live prefix within the lookback from a breakpoint at `position`, or -1."""
    return next((p for p in range(position, max(position - LOOKBACK, -1), -1) if live[p]), -1)


def _prefixes(model: str, blocks: list[_Block]) -> tuple[list[str], list[int]]:
    """The cache key and the token count of the prefix ending at each position."""
    digest = hashlib.sha256(model.encode())
    keys: list[str] = []
    cumulative: list[int] = []
    tokens = 0
    for block in blocks:
        digest.update(block.key_json.encode() + b"\n")  # JSON has no raw newline: an unambiguous join
        keys.append(digest.copy().hexdigest())
        tokens += block.tokens
        cumulative.append(tokens)
    return keys, cumulative
