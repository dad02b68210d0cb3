"""The one list of what the bot knows about a person or a group (`user_facts`); the caller commits.

Every read of held facts goes through `FactRepository` (the `HELD` filter is written here once), and
so does every change: adding (the same fact again reinforces its row), rewording, pinning, hiding,
taking back and superseding. Each change marks the owner's facts as changed
(`fact_consolidations.changed_at` and `graph_changed_at`), which is how tidying and the graph's job
find the owners to follow.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Interval,
    Select,
    String,
    Text,
    bindparam,
    cast,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncSession

from db.models import FactConsolidation, UserFact
from db.repositories.dedupe import fact_dedupe_key, insert_ignoring_duplicates, unique_by_key

# A fact still held: not taken back, not superseded, not retired.
HELD: ColumnElement[bool] = UserFact.invalidated_at.is_(None)


@functools.cache
def version_statement() -> Select[int, int | None, datetime | None, int | None, int | None]:
    """What `version` reads (bound parameter `owner_id`), built once: every turn reads it."""
    return select(
        func.count(UserFact.id),
        func.max(UserFact.id),
        func.max(UserFact.updated_at),
        func.sum(func.length(cast(UserFact.message_ids, Text))),
        func.sum(UserFact.reinforced),
    ).where(UserFact.user_id == bindparam("owner_id"), HELD)


# What places a fact in the profile and shows it, in this order (`held_rows`).
PROFILE_COLUMNS = (UserFact.id, UserFact.content, UserFact.category, UserFact.pinned)
# The profile's order within a section: the most reinforced, then the most recently said (or learned),
# then the newest.
PROFILE_ORDER = (
    UserFact.reinforced.desc(),
    func.coalesce(UserFact.last_seen_at, UserFact.created_at).desc(),
    UserFact.id.desc(),
)


class FactRepository:
    """Reads and changes one owner's facts at a time; every query is scoped by the owner's id."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- reads ------------------------------------------------------------------------------------

    async def held(
        self,
        owner_id: int,
        *,
        visible_only: bool = False,
        newest_first: bool = False,
        limit: int | None = None,
        learned_by: datetime | None = None,
        lock: bool = False,
    ) -> Sequence[UserFact]:
        """The owner's held facts, oldest first (newest first when asked); `visible_only` leaves
        out the hidden ones ("don't bring this up"), `learned_by` those learned after that time;
        `lock` holds their rows until the commit (PostgreSQL; SQLite's writer holds the whole
        database)."""
        stmt = select(UserFact).where(UserFact.user_id == owner_id, HELD)
        if visible_only:
            stmt = stmt.where(UserFact.hidden.is_(False))
        if learned_by is not None:
            stmt = stmt.where(UserFact.created_at <= learned_by)
        stmt = stmt.order_by(UserFact.id.desc() if newest_first else UserFact.id)
        if limit is not None:
            stmt = stmt.limit(limit)
        if lock:
            stmt = stmt.with_for_update()
        return (await self.session.execute(stmt)).scalars().all()

    async def held_rows(
        self, owner_id: int, *, in_effect_at: datetime | None = None, learned_by: datetime | None = None
    ) -> Sequence[tuple[Any, ...]]:
        """The owner's held facts as plain rows of the columns that place and show them in the profile
        (`PROFILE_COLUMNS`), ranked as a profile's section ranks them (`PROFILE_ORDER`); `in_effect_at`
        leaves out those the profile may not show then (hidden ones, plans whose date has passed),
        `learned_by` those learned after that time. No ORM objects, and no timestamps to convert,
        so thousands load in a few milliseconds."""
        stmt = select(*PROFILE_COLUMNS).where(UserFact.user_id == owner_id, HELD)
        if in_effect_at is not None:
            stmt = stmt.where(
                UserFact.hidden.is_(False),
                or_(UserFact.valid_until.is_(None), UserFact.valid_until >= in_effect_at),
            )
        if learned_by is not None:
            stmt = stmt.where(UserFact.created_at <= learned_by)
        # Through the connection: the ORM's per-row loading adds nothing to plain columns.
        connection = await self.session.connection()
        return [tuple(row) for row in (await connection.execute(stmt.order_by(*PROFILE_ORDER))).all()]

    async def held_one(self, owner_id: int, fact_id: int) -> UserFact | None:
        """One held fact of the owner, or None (another owner's id finds nothing)."""
        stmt = select(UserFact).where(UserFact.user_id == owner_id, UserFact.id == fact_id, HELD)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def version(self, owner_id: int) -> tuple[int, int, str, int, int]:
        """What changes whenever the owner's held facts do: how many, the newest id, the last change
        in place, the length of their sources and how often they were said (a cache of the facts is
        read again when it moves; a reinforcement dated in the past moves the last two)."""
        row = await self.session.execute(version_statement(), {"owner_id": owner_id})
        count, newest, changed, sources, said = row.one()
        return int(count or 0), int(newest or 0), str(changed or ""), int(sources or 0), int(said or 0)

    async def by_content(self, owner_id: int, content: str) -> UserFact | None:
        """The owner's fact with these words (held or not), or None."""
        stmt = select(UserFact).where(
            UserFact.user_id == owner_id, UserFact.dedupe_key == fact_dedupe_key(content)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def taken_back(self, owner_id: int) -> Sequence[UserFact]:
        """The owner's facts that were taken back or superseded, newest first."""
        stmt = (
            select(UserFact)
            .where(UserFact.user_id == owner_id, UserFact.invalidated_at.is_not(None))
            .order_by(UserFact.id.desc())
        )
        return (await self.session.execute(stmt)).scalars().all()

    # --- adding -----------------------------------------------------------------------------------

    async def add_sourced(
        self,
        owner_id: int,
        conversation_id: int | None,
        facts: Iterable[tuple[str, Sequence[int]]],
        at: datetime,
        *,
        source: str,
        category: str | None = None,
        categories: Sequence[str | None] | None = None,
        valid_until: Sequence[datetime | None] | None = None,
        pinned: bool = False,
    ) -> int:
        """Store (content, message ids) facts; returns how many are new.

        A fact already held (same normalised content) keeps its row: it gains the new message ids
        and counts as said again (`reinforced`, `last_seen_at`), but only when the ids add something
        or it has none, so a rerun of the same post-processing changes nothing. `categories`, when
        given, is one category per fact (else `category` for all); `valid_until`, one plan's date
        (or None) per fact.
        """
        sources: dict[str, set[int]] = {}
        rows: list[dict[str, Any]] = []
        for index, (content, message_ids) in enumerate(facts):
            if not content.strip():
                continue
            key = fact_dedupe_key(content)
            sources.setdefault(key, set()).update(int(i) for i in message_ids)
            kind = categories[index] if categories is not None and index < len(categories) else category
            until = valid_until[index] if valid_until is not None and index < len(valid_until) else None
            rows.append(
                {
                    "user_id": owner_id,
                    "conversation_id": conversation_id,
                    "content": content.strip(),
                    "source": source,
                    "category": kind,
                    "message_ids": [],
                    "dedupe_key": key,
                    "created_at": at,
                    "last_seen_at": at,
                    "pinned": pinned,
                    "valid_until": until,
                }
            )
        if not rows:
            return 0
        for row in rows:
            row["message_ids"] = sorted(sources[row["dedupe_key"]])
        wanted = {row["dedupe_key"] for row in rows}
        known = (
            await self.session.execute(
                select(UserFact.id, UserFact.dedupe_key, UserFact.message_ids, UserFact.invalidated_at).where(
                    UserFact.user_id == owner_id, UserFact.dedupe_key.in_(wanted)
                )
            )
        ).all()
        created = await insert_ignoring_duplicates(self.session, UserFact, unique_by_key(rows))
        changed = created > 0
        for fact_id, key, ids, invalidated_at in known:
            before = {int(i) for i in ids or []}
            merged = before | sources[key]
            if invalidated_at is not None:
                continue  # taken back: not learned again from the same words
            said_again = merged != before or not sources[key]
            if not said_again:
                continue
            values: dict[str, Any] = {
                "message_ids": sorted(merged),
                "reinforced": UserFact.reinforced + 1,
                "last_seen_at": at,
                "updated_at": at,
            }
            if pinned:
                values["pinned"] = True
            await self.session.execute(
                update(UserFact)
                .where(UserFact.id == fact_id)
                .values(**values)
                .execution_options(synchronize_session=False)
            )
            changed = True
        if changed:
            await mark_changed(self.session, owner_id, at)
        return created

    async def reinforce(self, owner_id: int, fact_id: int, message_ids: Sequence[int], at: datetime) -> int:
        """A held fact said again: it gains the message ids and counts as said again, but only when
        the ids add something (a rerun changes nothing); 1 when it was reinforced."""
        fact = await self.held_one(owner_id, fact_id)
        if fact is None:
            return 0
        before = {int(i) for i in fact.message_ids or []}
        merged = before | {int(i) for i in message_ids}
        if merged == before:
            return 0
        # A person's facts are written by one post-processing at a time: no concurrent increment.
        fact.message_ids, fact.reinforced = sorted(merged), fact.reinforced + 1
        fact.last_seen_at = fact.updated_at = at
        await mark_changed(self.session, owner_id, at)
        return 1

    # --- changes in place -------------------------------------------------------------------------

    async def reword(self, owner_id: int, fact_id: int, content: str, at: datetime) -> UserFact | None:
        """Give a held fact new words (the person's own correction of the wording).

        When another held fact already says the same, the reworded one is superseded by it (one fact,
        not two). Returns the fact that now holds the words, or None when there is no such fact.
        """
        fact = await self.held_one(owner_id, fact_id)
        if fact is None:
            return None
        key = fact_dedupe_key(content)
        if key == fact.dedupe_key:
            fact.content, fact.updated_at = content.strip(), at
            await mark_changed(self.session, owner_id, at)
            return fact
        twin = (
            await self.session.execute(
                select(UserFact).where(UserFact.user_id == owner_id, UserFact.dedupe_key == key)
            )
        ).scalar_one_or_none()
        if twin is not None:
            # The words are another row's already: that row holds them (brought back if it was taken
            # back, since the person now says it), and this one is superseded by it.
            twin.invalidated_at, twin.invalid_reason, twin.superseded_by = None, None, None
            twin.pinned = twin.pinned or fact.pinned
            twin.updated_at = at
            await self.supersede(
                owner_id, [fact.id], by=twin.id, at=at, reason="reworded as an existing fact"
            )
            return twin
        fact.content, fact.dedupe_key, fact.updated_at = content.strip(), key, at
        await mark_changed(self.session, owner_id, at)
        return fact

    async def set_flags(
        self,
        owner_id: int,
        fact_id: int,
        at: datetime,
        *,
        pinned: bool | None = None,
        hidden: bool | None = None,
    ) -> UserFact | None:
        """Pin or unpin, hide or show a held fact; None when the owner holds no such fact."""
        fact = await self.held_one(owner_id, fact_id)
        if fact is None:
            return None
        if pinned is not None:
            fact.pinned = pinned
        if hidden is not None:
            fact.hidden = hidden
        fact.updated_at = at
        await mark_changed(self.session, owner_id, at)
        return fact

    async def invalidate(self, owner_id: int, fact_ids: Iterable[int], at: datetime, *, reason: str) -> int:
        """Take facts back (kept, with when and why, left out of every read); how many were held."""
        return await self._update_many(
            owner_id, fact_ids, at, HELD, invalidated_at=at, invalid_reason=reason[:2000]
        )

    async def revive(self, owner_id: int, fact_ids: Iterable[int], at: datetime) -> int:
        """Hold again facts the owner took back and has now said again; how many."""
        taken_back = UserFact.invalidated_at.is_not(None)
        return await self._update_many(
            owner_id, fact_ids, at, taken_back, invalidated_at=None, invalid_reason=None, superseded_by=None
        )

    async def supersede(
        self, owner_id: int, fact_ids: Iterable[int], *, by: int, at: datetime, reason: str
    ) -> int:
        """Replace facts by a newer one of the same owner: taken back, with "superseded by" it."""
        ids = {int(i) for i in fact_ids} - {by}
        return await self._update_many(
            owner_id, ids, at, HELD, invalidated_at=at, invalid_reason=reason[:2000], superseded_by=by
        )

    async def _update_many(
        self, owner_id: int, fact_ids: Iterable[int], at: datetime, which: ColumnElement[bool], **values: Any
    ) -> int:
        """Set `values` on those of the owner's facts `fact_ids` that are `which`; how many changed."""
        ids = sorted({int(i) for i in fact_ids})
        if not ids:
            return 0
        result = await self.session.execute(
            update(UserFact)
            .where(UserFact.user_id == owner_id, UserFact.id.in_(ids), which)
            .values(**values, updated_at=at)
            .execution_options(synchronize_session=False)
        )
        count = int(result.rowcount or 0)  # type: ignore[attr-defined]
        if count:
            await mark_changed(self.session, owner_id, at)
        return count


async def mark_changed(session: AsyncSession, owner_id: int, at: datetime, *, facts: bool = True) -> None:
    """Record that the owner's facts changed (`facts`: tidying's and the graph's signal) or only what
    else the graph follows (a final day's key moments, a thought; tidying is left alone).

    Each column moves to `at` or, when that is not later (a conversation post-processed after a newer
    change), just past its current value: every change makes it strictly later, so a change is never
    taken as already done.
    """
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    tidied = {} if facts else {"consolidated_for": at}  # a new row's unchanged facts need no tidying
    stmt = insert(FactConsolidation).values(user_id=owner_id, changed_at=at, graph_changed_at=at, **tidied)
    moved: dict[str, ColumnElement[Any]] = {}
    for name in ("changed_at", "graph_changed_at") if facts else ("graph_changed_at",):
        current = getattr(FactConsolidation, name)
        if dialect == "sqlite":
            # SQLite stores UTC times as text with six fraction digits; strftime keeps three.
            later: ColumnElement[Any] = func.strftime(
                "%Y-%m-%d %H:%M:%f", current, "+0.001 seconds", type_=String
            ).concat("000")
            moved[name] = func.max(getattr(stmt.excluded, name), later)
        else:
            later = current + literal(timedelta(microseconds=1), Interval())
            moved[name] = func.greatest(getattr(stmt.excluded, name), later)
    await session.execute(stmt.on_conflict_do_update(index_elements=["user_id"], set_=moved))
