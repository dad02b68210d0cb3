"""A user's conversations: their stored PydanticAI history, and ending them; the caller commits."""

from __future__ import annotations

import functools
from datetime import date, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    BindParameter,
    Select,
    SQLColumnExpression,
    Update,
    and_,
    bindparam,
    func,
    literal,
    or_,
    select,
    update,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from db.base import JSONType
from db.models import QUEUED, TOUCHPOINT_KIND, Conversation, DaySegment, User


@functools.cache
def _user_and_active() -> Select[User, Conversation]:
    # Built once: every turn starts with it, and building it cost more than running it.
    return (
        select(User, Conversation)
        .outerjoin(Conversation, and_(Conversation.user_id == User.id, Conversation.status == "active"))
        .options(defer(Conversation.messages, raiseload=True))
        .where(User.id == bindparam("user_id"))
        .order_by(Conversation.id.desc())
        .limit(1)
    )


@functools.cache
def _active_and_day() -> Select[Conversation, DaySegment]:
    # Built once, as `_user_and_active`: the turn starts with it when it has the user already.
    user_id: BindParameter[int] = bindparam("user_id", type_=BigInteger())
    newest = (
        select(func.max(Conversation.id))
        .where(Conversation.user_id == user_id, Conversation.status == "active")
        .scalar_subquery()
    )
    return (
        select(Conversation, DaySegment)
        .select_from(select(literal(1).label("one")).subquery("one"))
        .outerjoin(Conversation, Conversation.id == newest)
        .outerjoin(DaySegment, and_(DaySegment.user_id == user_id, DaySegment.day == bindparam("day")))
        .options(defer(Conversation.messages, raiseload=True))
    )


def _append_turn(history: SQLColumnExpression[Any]) -> Update:
    return (
        update(Conversation)
        .where(Conversation.id == bindparam("conversation_id"))
        .values(messages=history, message_count=Conversation.message_count + 1)
        .returning(Conversation.message_count)
        .execution_options(synchronize_session=False)
    )


# Built once (per number of messages on SQLite): every answered turn runs one.
@functools.cache
def _appended_postgresql() -> Update:
    return _append_turn(Conversation.messages.op("||", return_type=JSONType)(bindparam("added", type_=JSONB)))


@functools.cache
def _appended_sqlite(count: int) -> Update:
    # SQLite keeps JSON as text: json_insert's `$[#]` appends each message to the array.
    steps: list[Any] = []
    for n in range(count):
        steps += ["$[#]", func.json(bindparam(f"added_{n}", type_=JSON))]
    return _append_turn(func.json_insert(Conversation.messages, *steps) if steps else Conversation.messages)


class ConversationRepository:
    """Conversations of a user and their stored PydanticAI history."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, conversation_id: int, *, history: bool = True) -> Conversation | None:
        """A conversation by id; `history=False` leaves the (possibly large) stored history unread."""
        options = [] if history else [defer(Conversation.messages, raiseload=True)]
        return await self.session.get(Conversation, conversation_id, options=options)

    async def append_turn(
        self, conversation_id: int, added: list[Any], *, whole: list[Any] | None = None
    ) -> int | None:
        """Append one turn's messages to a conversation's stored history and count one more message.

        One statement, and only the new messages travel: the database appends them to the stored
        array, so a turn's write does not grow with the session. `whole` replaces the stored array
        instead (it was broken or in an older form). Returns the new message count, or None when the
        conversation is gone (deleted by /forget).
        """
        params: dict[str, Any] = {"conversation_id": conversation_id}
        if whole is not None:
            stmt = _append_turn(bindparam("whole", type_=JSONType))
            params["whole"] = whole
        elif self.session.get_bind().dialect.name == "postgresql":
            stmt = _appended_postgresql()
            params["added"] = added
        else:
            stmt = _appended_sqlite(len(added))
            params.update((f"added_{n}", message) for n, message in enumerate(added))
        count = (await self.session.execute(stmt, params)).scalar_one_or_none()
        return int(count) if count is not None else None

    async def user_and_active(self, user_id: int) -> tuple[User | None, Conversation | None]:
        """The user and their open conversation (as `active_for`), read in one statement."""
        row = (await self.session.execute(_user_and_active(), {"user_id": user_id})).first()
        return (row[0], row[1]) if row is not None else (None, None)

    async def active_and_day(self, user_id: int, day: date) -> tuple[Conversation | None, DaySegment | None]:
        """The user's open conversation (as `active_for`) and their segment of `day`, in one statement."""
        row = (await self.session.execute(_active_and_day(), {"user_id": user_id, "day": day})).one()
        return row[0], row[1]

    async def active_for(self, user_id: int) -> Conversation | None:
        """The user's open conversation, if any (newest first, should there ever be two)."""
        stmt = (
            select(Conversation)
            .options(defer(Conversation.messages, raiseload=True))
            .where(Conversation.user_id == user_id, Conversation.status == "active")
            .order_by(Conversation.id.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def start(self, user_id: int, at: datetime) -> Conversation:
        """Open a new conversation starting at the given message time."""
        conversation = Conversation(
            user_id=user_id, status="active", started_at=at, last_message_at=at, messages=[], message_count=0
        )
        self.session.add(conversation)
        await self.session.flush()
        return conversation

    async def end_and_queue(self, conversation: Conversation, at: datetime) -> None:
        """End a conversation as of its last message, which queues it for post-processing.

        This is the post-processing queue's one way in (with `end_idle_and_queue`): a conversation
        whose status is "closed" is what `jobs/queue.py` claims. It lives here rather than in
        `jobs/` because the turn ends conversations and the agent never imports jobs.
        """
        conversation.status = QUEUED
        conversation.ended_at = at

    async def end_idle_and_queue(
        self,
        idle_before: datetime,
        *,
        user_id: int | None = None,
        unanswered_before: datetime | None = None,
    ) -> list[int]:
        """End and queue every active conversation whose last message is older than `idle_before`; their ids.

        A conversation the bot opened by writing first (kind `proactive`, no reply yet) ends when its
        message is older than `unanswered_before` instead (default: `idle_before`).
        """
        waiting = Conversation.kind == TOUCHPOINT_KIND
        cutoff = unanswered_before if unanswered_before is not None else idle_before
        stmt = (
            update(Conversation)
            .where(
                Conversation.status == "active",
                or_(
                    and_(~waiting, Conversation.last_message_at < idle_before),
                    and_(waiting, Conversation.last_message_at < cutoff),
                ),
            )
            .values(status=QUEUED, ended_at=Conversation.last_message_at)
            .returning(Conversation.id)
        )
        if user_id is not None:
            stmt = stmt.where(Conversation.user_id == user_id)
        return list((await self.session.execute(stmt)).scalars())
