"""A user's data as a whole: export it, or forget it from every store.

The database rows go with the user row (every table references `users` with ON DELETE CASCADE).
Stores outside those tables (search indexes, the knowledge graph) implement `UserDataStore` and
are passed in, so `/forget` cannot silently miss one that the runtime knows about; writers of
those stores register with the `WriteGuard` (agent/account/writers.py), so /forget is final.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import delete, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.export import collect, export_events
from agent.account.writers import WriteGuard
from agent.core.clock import Clock
from agent.core.errors import NikitaError
from db.models import PendingForget, User
from db.search_purge import purge_deleted

logger = logging.getLogger(__name__)

# What a store's deletion may raise when its backend fails; the part stays pending and is retried.
STORE_ERRORS = (NikitaError, SQLAlchemyError, OSError, TimeoutError)


class UserDataStore(Protocol):
    """A store holding user data outside the core tables."""

    name: str

    async def export_user(self, user_id: int) -> Any:
        """Everything this store holds about the user, JSON-serialisable."""
        ...

    async def forget_user(self, user_id: int) -> None:
        """Delete everything this store holds about the user."""
        ...


class UserCache(Protocol):
    """Something in memory that holds a user's data (decoded histories): dropped on /forget."""

    def drop_user(self, user_id: int) -> None:
        """Forget whatever is held for the user."""
        ...


async def export_user(
    sessions: async_sessionmaker[AsyncSession], user_id: int, stores: Sequence[UserDataStore] = ()
) -> dict[str, Any]:
    """The user's data as one JSON-serialisable document (/export writes it in parts: account/export.py)."""
    return await collect(export_events(sessions, user_id, stores))


@dataclass(frozen=True)
class ForgetResult:
    """What /forget did: whether there was a user, and the stores still to clear (retried later)."""

    found: bool
    stores_pending: tuple[str, ...] = ()


async def forget_user(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    stores: Sequence[UserDataStore] = (),
    *,
    guard: WriteGuard | None = None,
    caches: Sequence[UserCache] = (),
    now: datetime | None = None,
) -> ForgetResult:
    """Delete the user everywhere; nothing can write anything of theirs afterwards.

    1. One transaction deletes the user row (every table follows by ON DELETE CASCADE), merges the
       full-text index so none of its segments keeps their words, and records a `PendingForget`.
       From its commit on, every writer's check finds no user (ids are never reused), so no job,
       background task or retry can bring anything back.
    2. Writers already past their check (a graph episode, an embedding pass) are awaited.
    3. The external stores and the in-memory caches are cleared; the pending record goes with the
       last of them. A store that fails stays pending and the `forget` job retries it, so a graph
       that is down delays its part of the deletion but never loses it.

    `guard` is the runtime's `WriteGuard` (`Runtime.forget` passes it); without one, writers in
    flight are not awaited.
    """
    at = now or Clock().now()
    async with sessions() as session, session.begin():
        deleted = await session.execute(delete(User).where(User.id == user_id))
        found = bool(getattr(deleted, "rowcount", 0))
        if found:
            await purge_deleted(session)
        pending = await session.get(PendingForget, user_id)
        if found and pending is None:
            session.add(PendingForget(user_id=user_id, requested_at=at, attempts=0))
        elif not found and pending is None:
            return ForgetResult(found=False)
    if found:
        logger.info("user rows deleted", extra={"user_id": user_id})
    return await _clear_stores(sessions, user_id, stores, guard=guard, caches=caches, found=found)


async def finish_pending_forgets(
    sessions: async_sessionmaker[AsyncSession],
    stores: Sequence[UserDataStore],
    *,
    guard: WriteGuard | None = None,
    caches: Sequence[UserCache] = (),
    limit: int = 50,
) -> dict[str, int]:
    """Retry the external part of every /forget a store failed (the `forget` job)."""
    async with sessions() as session:
        user_ids = list(
            (
                await session.execute(
                    select(PendingForget.user_id).order_by(PendingForget.requested_at).limit(limit)
                )
            ).scalars()
        )
    still = 0
    for user_id in user_ids:
        result = await _clear_stores(sessions, user_id, stores, guard=guard, caches=caches, found=False)
        still += bool(result.stores_pending)
    return {"pending": len(user_ids), "finished": len(user_ids) - still, "still_pending": still}


async def _clear_stores(
    sessions: async_sessionmaker[AsyncSession],
    user_id: int,
    stores: Sequence[UserDataStore],
    *,
    guard: WriteGuard | None,
    caches: Sequence[UserCache],
    found: bool,
) -> ForgetResult:
    if guard is not None:
        await guard.wait_for_writers(user_id)
    for cache in caches:
        cache.drop_user(user_id)
    failed: list[str] = []
    errors: list[str] = []
    for store in stores:
        try:
            await store.forget_user(user_id)
        except STORE_ERRORS as exc:
            failed.append(store.name)
            errors.append(f"{store.name}: {type(exc).__name__}: {exc}"[:300])
            logger.warning(
                "a store could not forget the user; the forget job retries",
                extra={"user_id": user_id, "store": store.name},
                exc_info=exc,
            )
    async with sessions() as session, session.begin():
        pending = await session.get(PendingForget, user_id)
        if pending is not None and not failed:
            await session.delete(pending)
        elif pending is not None:
            pending.attempts += 1
            pending.last_error = "; ".join(errors)[:1000]
    return ForgetResult(found=found, stores_pending=tuple(failed))
