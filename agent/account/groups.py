"""A group chat as the owner of its memory: found or created by its chat id, moved when it migrates.

A group's memory (conversations, day summaries, threads, facts, transcript, graph group, usage) is
stored under a `users` row of kind `group`, so every query already scoped to one owner keeps a
group's memory apart from each member's private memory, and the other way round: the wall is the
owner id every query filters by, never an instruction to the model. Members are not made users; a
group message keeps its speaker (Telegram id and name) on its transcript row.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from db.models import TranscriptMessage, User
from db.repositories.users import UserRepository

GROUP = "group"
PERSON = "person"  # the kind of every other `users` row


def group_key(chat_id: int) -> str:
    """The surface key of a group chat's memory."""
    return f"telegram-chat:{chat_id}"


def is_group(user: User) -> bool:
    """True for a group chat's memory, False for a person."""
    return user.kind == GROUP


async def group_owner(
    sessions: async_sessionmaker[AsyncSession],
    *,
    chat_id: int,
    title: str | None,
    now: datetime,
    timezone: str,
) -> tuple[User, bool]:
    """The group's row, created on its first message (no onboarding); the flag says whether it is new."""
    async with sessions() as session:
        try:
            async with session.begin():
                found = await UserRepository(session).by_chat_id(chat_id)
                if found is not None:
                    return found, False
                created = await UserRepository(session).create(
                    key=group_key(chat_id),
                    created_at=now,
                    timezone=timezone,
                    name=title,
                    onboarding_status="complete",
                    kind=GROUP,
                    chat_id=chat_id,
                )
            return created, True
        except IntegrityError:
            pass  # two first messages of the group raced; the other one created it
    async with sessions() as session:
        again = await UserRepository(session).by_chat_id(chat_id)
        assert again is not None
        return again, False


async def move_group(sessions: async_sessionmaker[AsyncSession], old_chat_id: int, new_chat_id: int) -> bool:
    """A group became a supergroup (a new chat id): its memory follows it. False when nothing moved.

    Telegram sends the move twice (`migrate_to_chat_id` in the old chat, `migrate_from_chat_id` in
    the new one); the second finds the row already moved and changes nothing. Telegram message ids
    count per chat, so the new chat's ids start again: the old chat's ids are cleared from the
    transcript, or a new message would be taken for a repeat of an old one.
    """
    async with sessions() as session, session.begin():
        if await UserRepository(session).by_chat_id(new_chat_id) is not None:
            return False
        owner = await session.scalar(select(User.id).where(User.chat_id == old_chat_id, User.kind == GROUP))
        if owner is None:
            return False
        await session.execute(
            update(User).where(User.id == owner).values(chat_id=new_chat_id, key=group_key(new_chat_id))
        )
        await session.execute(
            update(TranscriptMessage)
            .where(TranscriptMessage.user_id == owner, TranscriptMessage.telegram_message_id.is_not(None))
            .values(telegram_message_id=None)
        )
        return True
