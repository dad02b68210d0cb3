"""Per-key state that stays bounded however many users the process has seen.

`BoundedCache` is a least-recently-used map limited by entries and by bytes (as its user measures
them); `KeyedLocks` keeps a key's lock only while someone holds or waits for it, so an idle user
costs nothing and a lock that is held or awaited is never dropped.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Hashable
from contextlib import asynccontextmanager


class BoundedCache[K: Hashable, V]:
    """An LRU map holding at most `max_entries` values and `max_bytes` bytes (by `size_of`).

    A value larger than `max_bytes` on its own is not kept at all: it would evict everyone else.
    """

    def __init__(
        self, *, max_entries: int, max_bytes: int | None = None, size_of: Callable[[V], int] | None = None
    ) -> None:
        self.max_entries = max(0, max_entries)
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._entries: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    @property
    def bytes(self) -> int:
        """The measured size of every value held."""
        return self._bytes

    def get(self, key: K) -> V | None:
        """The value for `key` (now the most recently used), or None."""
        found = self._entries.get(key)
        if found is None:
            return None
        self._entries.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V) -> None:
        """Keep `value` under `key`, evicting the least recently used values beyond the bounds."""
        self.pop(key)
        size = self._size_of(value) if self._size_of is not None else 0
        if self.max_entries == 0 or (self.max_bytes is not None and size > self.max_bytes):
            return
        self._entries[key] = (value, size)
        self._bytes += size
        while len(self._entries) > self.max_entries or (
            self.max_bytes is not None and self._bytes > self.max_bytes
        ):
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted

    def pop(self, key: K) -> V | None:
        """Drop `key`; its value, or None."""
        found = self._entries.pop(key, None)
        if found is None:
            return None
        self._bytes -= found[1]
        return found[0]

    def items(self) -> list[tuple[K, V]]:
        """Every key and value, least recently used first (a copy)."""
        return [(key, value) for key, (value, _) in self._entries.items()]

    def drop_where(self, predicate: Callable[[K, V], bool]) -> int:
        """Drop every entry the predicate selects; how many went."""
        doomed = [key for key, value in self.items() if predicate(key, value)]
        for key in doomed:
            self.pop(key)
        return len(doomed)

    def clear(self) -> None:
        """Drop everything."""
        self._entries.clear()
        self._bytes = 0


class KeyedLocks[K: Hashable]:
    """One asyncio lock per key, kept only while it is held or awaited (FIFO, like asyncio.Lock)."""

    def __init__(self) -> None:
        self._locks: dict[K, asyncio.Lock] = {}
        self._users: dict[K, int] = {}

    def __len__(self) -> int:
        return len(self._locks)

    def holds(self, key: K) -> bool:
        """Whether someone holds or awaits the key's lock now."""
        return key in self._locks

    @asynccontextmanager
    async def hold(self, key: K) -> AsyncIterator[None]:
        """Run the body holding the key's lock."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        self._users[key] = self._users.get(key, 0) + 1
        try:
            async with lock:
                yield
        finally:
            self._users[key] -= 1
            if self._users[key] == 0:
                del self._users[key]
                self._locks.pop(key, None)
