"""/export of everything stored about a user, streamed from the database page by page.

`export_events` reads the user's rows in pages (never all at once) and the external stores, and
yields them as events: a field at a path (`("user",)`), or one item of a list at a path
(`("messages",)`, `("knowledge_graph", "groups", "user", "facts")`). Two consumers:

- `collect` builds the one JSON document (`agent.account.forget.export_user`, tests);
- `PartWriter` writes JSON files of at most `part_bytes` each (Telegram takes documents up to
  50 MB from bots). Every part is a complete JSON object with the same nesting; a list that does
  not fit continues in the next part. The parts *deep-merge* into the whole document: objects
  merge key by key, lists concatenate in part order. One part (the usual case) is the document.

Memory holds one page of rows and one part's buffer at a time; an external store's export (the
knowledge graph) is read whole, as its `export_user` returns it.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any, BinaryIO, Literal

from sqlalchemy import Select, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import (
    Conversation,
    ConversationThread,
    DaySegment,
    ImportRun,
    MessageReaction,
    Reminder,
    Thought,
    Touchpoint,
    TranscriptMessage,
    User,
    UserFact,
)
from db.repositories.briefings import BriefingRepository

PAGE_ROWS = 1000
FORMAT = "nikita-export/2"

Kind = Literal["field", "item", "list"]


@dataclass(frozen=True)
class Event:
    """A value at a path: a field of an object, one item of a list, or an (empty) list."""

    kind: Kind
    path: tuple[str, ...]
    value: Any = None


def _plain(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime | date) else value


# Each section: its table and the columns exported under their own names (as namedtuple takes them).
_SECTIONS: dict[str, tuple[Any, str]] = {
    # An imported conversation names the import that brought it and its id in that export.
    "conversations": (
        Conversation,
        "id kind status started_at last_message_at summary tone import_id external_id",
    ),
    # Histories brought from another assistant's export (agent/account/imports.py).
    "imports": (
        ImportRun,
        "id source file_name status conversations_total messages_total conversations_stored "
        "messages_stored first_at last_at created_at finished_at",
    ),
    "messages": (TranscriptMessage, "id conversation_id role kind content sent_at"),
    "reactions": (MessageReaction, "message_id emoji added reacted_at"),
    "days": (DaySegment, "day summary key_moments status"),
    "threads": (ConversationThread, "type content status created_at"),
    "thoughts": (Thought, "content created_at"),
    # A fact's id is what another fact's `superseded_by` names.
    "facts": (
        UserFact,
        "id content source category pinned hidden reinforced message_ids created_at last_seen_at "
        "updated_at valid_until invalidated_at invalid_reason superseded_by",
    ),
    "reminders": (
        Reminder,
        "text repeat days next_local timezone status created_at finished_at sent_count snoozed_count",
    ),
    "follow_ups": (Touchpoint, "kind reason due_at status outcome text sent_at"),
}


async def _pages(
    session: AsyncSession, model: Any, names: str, user_id: int
) -> AsyncIterator[dict[str, Any]]:
    """The user's rows of one table as documents, ordered by id, PAGE_ROWS at a time (keyset paging)."""
    fields = names.split()
    columns = [getattr(model, name).label(name) for name in fields]
    after = 0
    while True:
        stmt: Select[Any] = (
            select(model.id.label("_row_id"), *columns)
            .where(model.user_id == user_id, model.id > after)
            .order_by(model.id)
            .limit(PAGE_ROWS)
        )
        rows = (await session.execute(stmt)).all()
        for row in rows:
            yield {name: _plain(row._mapping[name]) for name in fields}
        if len(rows) < PAGE_ROWS:
            return
        after = rows[-1]._row_id


def _value_events(path: tuple[str, ...], value: Any) -> Iterable[Event]:
    """A store's export as events: objects key by key, lists item by item, the rest as fields."""
    if isinstance(value, dict) and value:
        for key, inner in value.items():
            yield from _value_events((*path, str(key)), inner)
    elif isinstance(value, list | tuple):
        if not value:
            yield Event("list", path)
        for item in value:
            yield Event("item", path, item)
    else:
        yield Event("field", path, value)


async def export_events(
    sessions: async_sessionmaker[AsyncSession], user_id: int, stores: Sequence[Any] = ()
) -> AsyncIterator[Event]:
    """Everything stored about the user, as events (nothing at all when there is no such user).

    `stores` are the runtime's `UserDataStore`s (agent/account/forget.py), each exported under its name.
    """
    async with sessions() as session:
        user = await session.get(User, user_id)
        if user is None:
            return
        yield Event(
            "field",
            ("user",),
            {
                "name": user.name,
                "timezone": user.timezone,
                "language": user.language,
                "profile": user.profile,
                "created_at": _plain(user.created_at),
                "last_message_at": _plain(user.last_message_at),
                "followups": user.followups,
            },
        )
        for section, (model, fields) in _SECTIONS.items():
            yield Event("list", (section,))
            async for item in _pages(session, model, fields, user_id):
                yield Event("item", (section,), item)
        briefing = await BriefingRepository(session).get(user_id)
        if briefing is not None:
            yield Event(
                "field",
                ("briefing",),
                {"text": briefing.text, "voice": briefing.voice, "written_at": _plain(briefing.written_at)},
            )
    for store in stores:
        for event in _value_events((store.name,), await store.export_user(user_id)):
            yield event


async def collect(events: AsyncIterator[Event]) -> dict[str, Any]:
    """The events as one document (what the parts deep-merge into)."""
    document: dict[str, Any] = {}
    async for event in events:
        *parents, last = event.path
        node = document
        for key in parents:
            node = node.setdefault(key, {})
        if event.kind == "field":
            node[last] = event.value
        else:
            items = node.setdefault(last, [])
            if event.kind == "item":
                items.append(event.value)
    return document


def _encode(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class PartWriter:
    """Writes events into JSON files of at most `part_bytes` bytes each (see the module doc)."""

    def __init__(self, directory: Path, *, part_bytes: int, stem: str = "nikita-export") -> None:
        self.directory = directory
        self.part_bytes = part_bytes
        self.stem = stem
        self._paths: list[Path] = []
        self._file: BinaryIO | None = None
        self._size = 0
        self._items_in_part = 0
        self._root_children = 0
        # Open containers below the part's root object: (key, "{" or "[", children written).
        self._open: list[list[Any]] = []

    async def write_all(self, events: AsyncIterator[Event]) -> list[Path]:
        """Consume every event; the finished parts, named `<stem>.json` or `<stem>-<i>-of-<n>.json`."""
        async for event in events:
            self.add(event)
        return self.finish()

    def add(self, event: Event) -> None:
        """Write one event, starting a new part first when it would not fit in this one."""
        if event.kind == "field":
            chain, leaf = list(event.path[:-1]), f"{_encode(event.path[-1])}: {_encode(event.value)}"
            kinds = ["{"] * len(chain)
        else:
            chain, leaf = list(event.path), "" if event.kind == "list" else _encode(event.value)
            kinds = ["{"] * (len(chain) - 1) + ["["]
        if self._file is None:
            self._start_part()
        before = ([frame.copy() for frame in self._open], self._root_children)
        text = self._reach(chain, kinds) + (self._separator() + leaf if leaf else "")
        # What closing every container would still cost, counted so a part never overflows.
        closing = len(self._open) + 3
        if self._items_in_part and self._size + len(text.encode()) + closing > self.part_bytes:
            self._open, self._root_children = before  # nothing of `text` was written
            self._end_part()
            self._start_part()
            text = self._reach(chain, kinds) + (self._separator() + leaf if leaf else "")
        self._write(text)
        if leaf:
            self._items_in_part += 1

    def finish(self) -> list[Path]:
        """Close the last part and name every part with its number and the total."""
        if self._file is None:
            self._start_part()
        self._end_part()
        total = len(self._paths)
        if total == 1:
            final = [self._paths[0].rename(self.directory / f"{self.stem}.json")]
        else:
            final = [
                path.rename(self.directory / f"{self.stem}-{i}-of-{total}.json")
                for i, path in enumerate(self._paths, start=1)
            ]
        self._paths = []
        return final

    def _separator(self) -> str:
        # The innermost open container (or the root) gets one more child.
        frame = self._open[-1] if self._open else None
        count = frame[2] if frame is not None else self._root_children
        if frame is not None:
            frame[2] += 1
        else:
            self._root_children += 1
        return ",\n" if count else "\n"

    def _reach(self, chain: list[str], kinds: list[str]) -> str:
        """Close what is not on the path to `chain`, open what is missing; the text to write."""
        common = 0
        while (
            common < len(self._open)
            and common < len(chain)
            and self._open[common][0] == chain[common]
            and self._open[common][1] == kinds[common]
        ):
            common += 1
        text = ""
        while len(self._open) > common:
            text += "]" if self._open.pop()[1] == "[" else "}"
        for key, kind in zip(chain[common:], kinds[common:], strict=True):
            text += self._separator() + f"{_encode(key)}: {kind}"
            self._open.append([key, kind, 0])
        return text

    def _start_part(self) -> None:
        path = self.directory / f".{self.stem}.part{len(self._paths) + 1}"
        self._paths.append(path)
        self._file = path.open("wb")
        self._size = 0
        self._items_in_part = 0
        self._root_children = 0
        reopen = [(frame[0], frame[1]) for frame in self._open]
        self._open = []
        header = {"format": FORMAT, "part": len(self._paths)}
        self._write("{" + self._separator() + f'"export": {_encode(header)}')
        # A list cut at the end of the previous part continues here, at the same place.
        self._write(self._reach([key for key, _ in reopen], [kind for _, kind in reopen]))

    def _end_part(self) -> None:
        assert self._file is not None
        closing = "".join("]" if frame[1] == "[" else "}" for frame in reversed(self._open))
        self._write(closing + "\n}\n")
        self._file.close()
        self._file = None

    def _write(self, text: str) -> None:
        assert self._file is not None
        data = text.encode()
        self._file.write(data)
        self._size += len(data)
