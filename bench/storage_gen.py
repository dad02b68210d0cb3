"""A history of many people, fast: a few people's real turns recorded, then written again in bulk.

`bench.storage.record` has a few people talk with the offline demo models through the real runtime
(turns, post-processing, day summaries, nightly finalisation, the default embedder indexing every
turn); `read_template` reads back every row their days left, table by table and day by day.
`replay` writes those rows again, copy after copy of the recorded people, until there are `people`,
day by day, as plain inserts: every id moved into a range of its own (interleaved, so ids grow with
time across people as they do when people talk at once), every reference to it (foreign keys, the
message ids that segments, search chunks and facts hold) moved with it, and the words that carry
meaning replaced, for each person and day, by made-up words of the same length drawn by Zipf's law
(so the full-text indexes see many people's words, not the recorded people's six sentences).
Lengths, row counts, JSON shapes, the search chunks' vectors (the default embedder's, of the
recorded text) and the timestamps stay as the real turns wrote them; the full-text rows are made by
the database's own triggers and generated columns as they are for a turn.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import Date, DateTime, Table, Text, select, text

from db.engine import create_engine
from db.models import Base

# Columns that hold another row's id without a foreign key: table -> {column: referenced table}.
_REFERENCES: dict[str, dict[str, str]] = {
    "day_segments": {
        "first_message_id": "transcript_messages",
        "last_message_id": "transcript_messages",
        "last_summarized_message_id": "transcript_messages",
    },
    "search_chunks": {
        "first_message_id": "transcript_messages",
        "last_message_id": "transcript_messages",
        "message_ids": "transcript_messages",
    },
    "user_facts": {"message_ids": "transcript_messages", "superseded_by": "user_facts"},
    "touchpoints": {"transcript_message_id": "transcript_messages"},
    "reminders": {"source_message_id": "transcript_messages"},
    "transcript_messages": {"reply_to_id": "transcript_messages"},
    "conversation_threads": {"resolved_by_conversation_id": "conversations"},
}
# Columns unique across people that are not ids: written per person.
_PER_PERSON = {("users", "key"): "cli:storage-{person}", ("users", "name"): "P{person}"}
_WORD = re.compile(r"(?<![\w-])[A-Za-z]+(?![\w-])")
# Words kept as said: the language's own small words (full-text search drops most of them as stop
# words, and every text has them), so only the words that carry meaning are drawn anew.
_KEPT = frozenset(
    "a about after again all am an and any are as at be because been but by can could did do does for"
    " from had has have he her him his how i if in into is it its just me more most my no nor not now of"
    " on or our out over she should so some such than that the their them then there these they this"
    " those to too until up very was we were what when where which while who why will with would you"
    " your".split()
)
_SYLLABLES = (*(c + v for c in "bcdfghjklmnprstvwz" for v in "aeiou"), "th", "st", "ng", "er", "an")


@dataclass(frozen=True)
class Template:
    """What a few people's real turns and jobs left: rows by table and by day (the table's first date
    or time column, from `start`), the tables of no person (daily counters), the recorded people's
    ids, and the words they said."""

    days: dict[str, list[list[dict[str, Any]]]]
    shared: dict[str, list[list[dict[str, Any]]]]
    first_ids: dict[str, int]
    users: tuple[int, ...]
    said: frozenset[str]
    span: int

    def messages(self) -> int:
        """Transcript messages of the recorded people."""
        return sum(len(day) for day in self.days.get("transcript_messages", []))


# When a row was written, where a table's first date or time column says otherwise.
_BORN = {"touchpoints": "planned_at", "user_facts": "created_at"}


def _born(table: Table) -> str | None:
    """The column that places a row in time."""
    if table.name in _BORN:
        return _BORN[table.name]
    for column in table.columns:
        if isinstance(column.type, (Date, DateTime)) or "DateTime" in type(column.type).__name__:
            return column.name
    return None


def _day_of(value: Any, start: datetime, span: int) -> int:
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=UTC)
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day, tzinfo=UTC)
    else:
        return 0
    return max(0, min(span - 1, (moment - start) // timedelta(days=1)))


async def read_template(url: str, start: datetime, span: int) -> Template:
    """Every row in the database at `url` by day of `span` from `start`: people's and shared."""
    days: dict[str, list[list[dict[str, Any]]]] = {}
    shared: dict[str, list[list[dict[str, Any]]]] = {}
    first_ids: dict[str, int] = {}
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            for table in Base.metadata.sorted_tables:
                owned = "user_id" in table.c or table.name == "users"
                query = select(table).order_by(table.c.id) if "id" in table.c else select(table)
                found = [dict(row._mapping) for row in (await conn.execute(query)).all()]
                born = _born(table)
                by_day: list[list[dict[str, Any]]] = [[] for _ in range(span)]
                for row in found:
                    by_day[_day_of(row[born] if born else None, start, span)].append(row)
                (days if owned else shared)[table.name] = by_day
                if owned and found and "id" in table.c:
                    first_ids[table.name] = min(int(row["id"]) for row in found)
            users = tuple(sorted((await conn.scalars(text("SELECT id FROM users"))).all()))
            said = await conn.scalars(text("SELECT content FROM transcript_messages WHERE role = 'user'"))
            words = frozenset(word for line in said for word in _WORD.findall(str(line)))
    finally:
        await engine.dispose()
    return Template(days, shared, first_ids, users, words, span)


class Words:
    """Same-length words for what the recorded people said, drawn per person and day from a
    vocabulary of `size` made-up words by Zipf's law (a word's share falls with its rank, as in
    language: a few common, most rare); small function words are kept."""

    def __init__(self, said: frozenset[str], size: int = 20_000, seed: int = 7) -> None:
        self.said = frozenset(word for word in said if word.lower() not in _KEPT)
        made = random.Random(seed)
        by_length: dict[int, list[str]] = {}
        for _ in range(size):
            word = "".join(made.choice(_SYLLABLES) for _ in range(made.randint(1, 6)))
            by_length.setdefault(len(word), []).append(word)
        self.by_length = by_length

    def for_day(self, person: int, day: int) -> dict[str, str]:
        """Each said word's stand-in for one person's day."""
        draw = random.Random(person * 100_003 + day)
        chosen = {}
        for word in sorted(self.said):
            pool = self.by_length.get(len(word)) or self.by_length[max(self.by_length)]
            made = pool[int(len(pool) ** draw.random()) - 1][: len(word)].ljust(len(word), "a")
            chosen[word] = made.capitalize() if word[0].isupper() else made
        return chosen


def _vary(value: Any, chosen: dict[str, str]) -> Any:
    """`value` with the said words replaced (JSON walked: values only, never keys)."""
    if isinstance(value, str):
        return _WORD.sub(lambda m: chosen.get(m.group(0), m.group(0)), value)
    if isinstance(value, list):
        return [_vary(item, chosen) for item in value]
    if isinstance(value, dict):
        return {key: _vary(item, chosen) for key, item in value.items()}
    return value


def _copies(template: Template, people: int) -> int:
    """How many copies of the recorded people make `people`."""
    return -(-people // len(template.users))


def _mover(template: Template, copies: int, copy: int) -> Callable[[str, Any], Any]:
    """Where a recorded id of a table lands in `copy` of the recorded people: interleaved with the
    other copies' (ids grow with time across people, as when they talk at once)."""

    def move(table: str, value: Any) -> Any:
        if value is None or table not in template.first_ids:
            return value
        if isinstance(value, list):
            return [move(table, item) for item in value]
        first = template.first_ids[table]
        return (int(value) - first) * copies + copy + first

    return move


def _copy_rows(template: Template, table: Table, rows: Iterable[dict[str, Any]], *, people: int, copy: int,
               day: int, words: Words) -> list[dict[str, Any]]:  # fmt: skip
    """The recorded rows of one table and day as `copy` of the recorded people writes them (people
    numbered from copy x the recorded people on, up to `people`)."""
    move = _mover(template, _copies(template, people), copy)
    owner = table.name == "users"
    moves = {column.name: next(iter(column.foreign_keys)).column.table.name for column in table.columns
             if column.foreign_keys}  # fmt: skip
    moves |= _REFERENCES.get(table.name, {})
    if "id" in table.c and table.name in template.first_ids:
        moves["id"] = table.name
    varied = [
        name for name, column in table.c.items()
        if isinstance(column.type, Text) or "JSON" in type(column.type).__name__.upper()
    ]  # fmt: skip
    out: list[dict[str, Any]] = []
    said: dict[int, dict[str, str]] = {}
    for row in rows:
        person = copy * len(template.users) + template.users.index(row["id" if owner else "user_id"])
        if person >= people:
            continue
        chosen = said.get(person) or said.setdefault(person, words.for_day(person, day))
        new = dict(row)
        for name, target in moves.items():
            new[name] = move(target, row[name])
        for name in varied:
            new[name] = _vary(new[name], chosen)
        for (where, name), pattern in _PER_PERSON.items():
            if where == table.name:
                new[name] = pattern.format(person=person)
        out.append(new)
    return out


async def replay(
    url: str, template: Template, people: int, until: int, *, first_day: int = 0, words: Words | None = None
) -> None:
    """Write the recorded rows of days [first_day, until) again for `people` people at `url`."""
    words = words or Words(template.said)
    engine = create_engine(url)
    try:
        for day in range(first_day, until):
            async with engine.begin() as conn:
                for table in Base.metadata.sorted_tables:
                    if table.name in template.shared:
                        batch = template.shared[table.name][day]
                    else:
                        recorded = template.days.get(table.name, [[]] * template.span)[day]
                        batch = [
                            row for copy in range(_copies(template, people))
                            for row in _copy_rows(template, table, recorded, people=people, copy=copy,
                                                  day=day, words=words)
                        ]  # fmt: skip
                    if batch:
                        await conn.execute(table.insert(), batch)
        if engine.dialect.name == "postgresql":
            async with engine.begin() as conn:
                for name in template.first_ids:
                    sequence = f"pg_get_serial_sequence('{name}', 'id')"
                    await conn.execute(
                        text(
                            f"SELECT setval({sequence}, max(id)) FROM {name}"
                            f" HAVING max(id) IS NOT NULL AND {sequence} IS NOT NULL"
                        )
                    )
    finally:
        await engine.dispose()
