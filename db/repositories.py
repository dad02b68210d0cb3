"""Repositories for users, conversations, transcript and context snapshots; the caller commits."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from sqlalchemy import JSON, SQLColumnExpression, and_, bindparam, func, or_, select, update
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import defer

from db.base import JSONType
from db.models import PROACTIVE, QUEUED, Conversation, DaySegment, GeneratedPrompt, TranscriptMessage, User


async def user_present(session: AsyncSession, user_id: int) -> bool:
    """Whether the user still exists, checked in the caller's transaction before it writes.

    On PostgreSQL the row is locked FOR KEY SHARE until that transaction ends, so a concurrent
    /forget's DELETE waits for it and then removes what it wrote too (SQLite has one writer at a
    time). User ids are never reused, so a missing row means forgotten for good.
    """
    stmt = select(User.id).where(User.id == user_id).with_for_update(read=True, key_share=True)
    return await session.scalar(stmt) is not None


class UserRepository:
    """Look up and create users."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, user_id: int) -> User | None:
        """A user by primary key."""
        return await self.session.get(User, user_id)

    async def by_key(self, key: str) -> User | None:
        """A user by their surface key ("telegram:42", "cli:alice")."""
        return (await self.session.execute(select(User).where(User.key == key))).scalar_one_or_none()

    async def by_telegram_id(self, telegram_id: int) -> User | None:
        """A user by Telegram id."""
        stmt = select(User).where(User.telegram_id == telegram_id)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def create(
        self,
        *,
        key: str,
        created_at: datetime,
        timezone: str,
        name: str | None = None,
        telegram_id: int | None = None,
        onboarding_status: str = "pending",
    ) -> User:
        """Insert a new user and flush to get its id."""
        user = User(
            key=key,
            telegram_id=telegram_id,
            name=name,
            timezone=timezone,
            onboarding_status=onboarding_status,
            profile={},
            created_at=created_at,
        )
        self.session.add(user)
        await self.session.flush()
        return user


class ConversationRepository:
    """Sessions of a user and their stored PydanticAI history."""

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
        history: SQLColumnExpression[Any]
        if whole is not None:
            history = bindparam("whole", whole, JSONType)
        elif self.session.get_bind().dialect.name == "postgresql":
            history = Conversation.messages.op("||", return_type=JSONType)(bindparam("added", added, JSONB))
        else:
            # SQLite keeps JSON as text: json_insert's `$[#]` appends each message to the array.
            steps: list[Any] = []
            for n, message in enumerate(added):
                steps += ["$[#]", func.json(bindparam(f"added_{n}", message, JSON))]
            history = func.json_insert(Conversation.messages, *steps) if steps else Conversation.messages
        stmt = (
            update(Conversation)
            .where(Conversation.id == conversation_id)
            .values(messages=history, message_count=Conversation.message_count + 1)
            .returning(Conversation.message_count)
            .execution_options(synchronize_session=False)
        )
        count = (await self.session.execute(stmt)).scalar_one_or_none()
        return int(count) if count is not None else None

    async def user_and_active(self, user_id: int) -> tuple[User | None, Conversation | None]:
        """The user and their open session (as `active_for`), read in one statement."""
        stmt = (
            select(User, Conversation)
            .outerjoin(Conversation, and_(Conversation.user_id == User.id, Conversation.status == "active"))
            .options(defer(Conversation.messages, raiseload=True))
            .where(User.id == user_id)
            .order_by(Conversation.id.desc())
            .limit(1)
        )
        row = (await self.session.execute(stmt)).first()
        return (row[0], row[1]) if row is not None else (None, None)

    async def active_for(self, user_id: int) -> Conversation | None:
        """The user's open session, if any (newest first, should there ever be two)."""
        stmt = (
            select(Conversation)
            .options(defer(Conversation.messages, raiseload=True))
            .where(Conversation.user_id == user_id, Conversation.status == "active")
            .order_by(Conversation.id.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def start(self, user_id: int, at: datetime) -> Conversation:
        """Open a new session starting at the given message time."""
        conversation = Conversation(
            user_id=user_id, status="active", started_at=at, last_message_at=at, messages=[], message_count=0
        )
        self.session.add(conversation)
        await self.session.flush()
        return conversation

    async def end_and_queue(self, conversation: Conversation, at: datetime) -> None:
        """End a session as of its last message, which queues it for post-processing.

        This is the post-processing queue's one way in (with `end_idle_and_queue`): a conversation
        whose status is "closed" is what `jobs/queue.py` claims. It lives here rather than in
        `jobs/` because the turn ends sessions and the agent never imports jobs.
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
        """End and queue every active session whose last message is older than `idle_before`; their ids.

        A session the bot opened by writing first (kind `proactive`, no reply yet) ends when its
        message is older than `unanswered_before` instead (default: `idle_before`).
        """
        waiting = Conversation.kind == PROACTIVE
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


class TranscriptRepository:
    """The transcript: every message as a row, the source of truth for search and export."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        *,
        user_id: int,
        conversation_id: int | None,
        role: str,
        content: str,
        sent_at: datetime,
        kind: str = "text",
        telegram_message_id: int | None = None,
        reply_to_id: int | None = None,
        day_segment_id: int | None = None,
    ) -> TranscriptMessage:
        """Insert one message and flush to get its id."""
        message = TranscriptMessage(
            user_id=user_id,
            conversation_id=conversation_id,
            role=role,
            kind=kind,
            content=content,
            sent_at=sent_at,
            telegram_message_id=telegram_message_id,
            reply_to_id=reply_to_id,
            day_segment_id=day_segment_id,
        )
        self.session.add(message)
        await self.session.flush()
        return message

    async def by_telegram_id(self, user_id: int, telegram_message_id: int) -> TranscriptMessage | None:
        """The user's message with this Telegram id, if already stored (retried delivery)."""
        stmt = select(TranscriptMessage).where(
            TranscriptMessage.user_id == user_id,
            TranscriptMessage.role == "user",
            TranscriptMessage.telegram_message_id == telegram_message_id,
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def reply_to(self, message_id: int) -> TranscriptMessage | None:
        """The assistant message that answered a stored user message."""
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.reply_to_id == message_id, TranscriptMessage.role == "assistant")
            .order_by(TranscriptMessage.id)
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def for_conversation(self, conversation_id: int) -> Sequence[TranscriptMessage]:
        """All messages of a conversation in order."""
        stmt = (
            select(TranscriptMessage)
            .where(TranscriptMessage.conversation_id == conversation_id)
            .order_by(TranscriptMessage.sent_at, TranscriptMessage.id)
        )
        return (await self.session.execute(stmt)).scalars().all()

    async def for_user(self, user_id: int, *, limit: int | None = None) -> Sequence[TranscriptMessage]:
        """A user's messages, oldest first (newest `limit` when given)."""
        stmt = select(TranscriptMessage).where(TranscriptMessage.user_id == user_id)
        if limit is None:
            return (await self.session.execute(stmt.order_by(TranscriptMessage.id))).scalars().all()
        rows = (await self.session.execute(stmt.order_by(TranscriptMessage.id.desc()).limit(limit))).scalars()
        return list(reversed(rows.all()))


class PromptRepository:
    """Context snapshots (`generated_prompts`)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(
        self,
        *,
        user_id: int,
        conversation_id: int | None,
        message_id: int | None,
        instructions: str,
        snapshot: dict[str, Any],
        created_at: datetime,
    ) -> GeneratedPrompt:
        """Record what one turn's model call was given."""
        prompt = GeneratedPrompt(
            user_id=user_id,
            conversation_id=conversation_id,
            message_id=message_id,
            instructions=instructions,
            context_snapshot=snapshot,
            created_at=created_at,
        )
        self.session.add(prompt)
        await self.session.flush()
        return prompt

    async def latest_for(self, user_id: int) -> GeneratedPrompt | None:
        """The newest snapshot of a user."""
        stmt = (
            select(GeneratedPrompt)
            .where(GeneratedPrompt.user_id == user_id)
            .order_by(GeneratedPrompt.id.desc())
            .limit(1)
        )
        return (await self.session.execute(stmt)).scalar_one_or_none()


class DaySegmentRepository:
    """Day segments: one row per user and local calendar day."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def for_day(self, user_id: int, day: date) -> DaySegment | None:
        """The user's segment for a calendar day, if it exists."""
        stmt = select(DaySegment).where(DaySegment.user_id == user_id, DaySegment.day == day)
        return (await self.session.execute(stmt)).scalar_one_or_none()

    async def open(self, user_id: int, day: date, timezone: str, at: datetime) -> DaySegment:
        """The segment for `day`, opened at this message when it is the first of the day."""
        segment = await self.for_day(user_id, day)
        if segment is None:
            segment = DaySegment(
                user_id=user_id,
                day=day,
                timezone=timezone,
                first_message_at=at,
                last_message_at=at,
                message_count=0,
                key_moments=[],
                messages_since_summary=0,
                summary_due=False,
                status="open",
            )
            self.session.add(segment)
            await self.session.flush()
        return segment

    @staticmethod
    def record_message(segment: DaySegment, message_id: int, at: datetime) -> None:
        """Count a stored message into its day."""
        if segment.first_message_id is None:
            segment.first_message_id = message_id
        segment.last_message_id = message_id
        segment.first_message_at = min(segment.first_message_at, at)
        segment.last_message_at = max(segment.last_message_at, at)
        segment.message_count += 1
        segment.messages_since_summary += 1
