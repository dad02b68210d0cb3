"""/forget around groups: a member's own lines in groups, and a whole group's memory.

A member's private /forget deletes their person row; their lines in groups belong to the groups'
memory (other members saw them), so on request they are blanked there: the transcript text of
the rows they spoke (by `speaker_telegram_id`), those lines in the groups' stored histories, and
the groups' embedded sections of those days (the full-text indexes follow the rows by trigger or
generated column). A group's own /forget, by one of its Telegram admins, is `forget_user` on the
group's owner row: everything of the group goes by cascade, with its graph groups and caches.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.account.forget import UserCache
from agent.account.groups import GROUP
from agent.account.writers import WriteGuard
from db.models import Conversation, SearchChunk, TranscriptMessage, User
from db.search_purge import purge_deleted

DELETED = "[deleted]"


async def group_owner_id(sessions: async_sessionmaker[AsyncSession], chat_id: int) -> int | None:
    """The owner row of a group chat's memory, if the group has one."""
    async with sessions() as session:
        return await session.scalar(select(User.id).where(User.chat_id == chat_id, User.kind == GROUP))


async def group_lines_of(sessions: async_sessionmaker[AsyncSession], telegram_id: int) -> int:
    """How many lines this Telegram user said in groups that still hold their text."""
    async with sessions() as session:
        count = await session.scalar(
            select(func.count())
            .select_from(TranscriptMessage)
            .join(User, User.id == TranscriptMessage.user_id)
            .where(
                User.kind == GROUP,
                TranscriptMessage.speaker_telegram_id == telegram_id,
                TranscriptMessage.content != "",
            )
        )
    return int(count or 0)


async def forget_group_words(
    sessions: async_sessionmaker[AsyncSession],
    telegram_id: int,
    *,
    caches: Sequence[UserCache] = (),
    guard: WriteGuard | None = None,
) -> int:
    """Blank everything this Telegram user said in any group; how many lines were blanked.

    An indexing pass of a group may have read the lines before they were blanked: with the
    runtime's `guard`, its writers are awaited and those days' sections deleted once more after.
    """
    async with sessions() as session, session.begin():
        rows = (
            await session.execute(
                select(
                    TranscriptMessage.id,
                    TranscriptMessage.user_id,
                    TranscriptMessage.conversation_id,
                    TranscriptMessage.day_segment_id,
                    TranscriptMessage.content,
                    TranscriptMessage.speaker_name,
                )
                .join(User, User.id == TranscriptMessage.user_id)
                .where(User.kind == GROUP, TranscriptMessage.speaker_telegram_id == telegram_id)
            )
        ).all()
        if not rows:
            return 0
        ids = [r.id for r in rows]
        await session.execute(
            update(TranscriptMessage)
            .where(TranscriptMessage.id.in_(ids))
            .values(content="")
            .execution_options(synchronize_session=False)
        )
        spoken: dict[int, list[tuple[str | None, str]]] = {}
        for r in rows:
            if r.conversation_id is not None and r.content:
                spoken.setdefault(r.conversation_id, []).append((r.speaker_name, r.content))
        for conversation in (
            await session.execute(select(Conversation).where(Conversation.id.in_(spoken)))
        ).scalars():
            conversation.messages = _without_lines(conversation.messages or [], spoken[conversation.id])
        owners = {r.user_id for r in rows}
        days = {r.day_segment_id for r in rows if r.day_segment_id is not None}
        # The embedded sections of those days held the words; the index embeds the blanked day again.
        await _drop_sections(session, owners, days)
        await purge_deleted(session)
    if guard is not None:
        for owner in owners:
            await guard.wait_for_writers(owner)
        async with sessions() as session, session.begin():
            await _drop_sections(session, owners, days)
    for owner in owners:
        for cache in caches:
            cache.drop_user(owner)
    return len(ids)


async def _drop_sections(session: AsyncSession, owners: set[int], days: set[int]) -> None:
    await session.execute(
        delete(SearchChunk).where(SearchChunk.user_id.in_(owners), SearchChunk.day_segment_id.in_(days))
    )


def _without_lines(messages: list[Any], lines: list[tuple[str | None, str]]) -> list[Any]:
    """The stored history with each of these lines replaced by a mark, in the user prompts only.

    A group turn's prompt carries the lines heard as "Name: text" (or "Name (to you): text"); a
    line is matched whole after its speaker's name, so other members' lines with the same words stay.
    """
    patterns = [
        re.compile(
            r"(^"
            + (re.escape(name) + r"(?: \(to you\))?: " if name else "")
            + r")"
            + re.escape(text)
            + r"(?=\n|$)",
            re.MULTILINE,
        )
        for name, text in lines
    ]

    def clean(text: str) -> str:
        for pattern in patterns:
            text = pattern.sub(lambda m: m.group(1) + DELETED, text)
        return text

    out: list[Any] = []
    for message in messages:
        if isinstance(message, dict) and message.get("kind") == "request":
            parts = []
            for part in message.get("parts", []):
                if isinstance(part, dict) and part.get("part_kind") == "user-prompt":
                    content = part.get("content")
                    if isinstance(content, str):
                        part = {**part, "content": clean(content)}
                    elif isinstance(content, list):
                        part = {**part, "content": [clean(c) if isinstance(c, str) else c for c in content]}
                parts.append(part)
            message = {**message, "parts": parts}
        out.append(message)
    return out
