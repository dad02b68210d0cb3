"""Reactions to the bot's answers: stored beside the answer they are on, read back as memory.

A surface reports a reaction by the id its chat gave the answer. In a private Telegram chat the
person's messages and the bot's answers share one sequence of ids, and the answer to a message
comes after it and before the person's next one, so the answer reacted to is the reply to the
person's latest message before that id (a reaction to the person's own message is none of ours).
Every change is kept (emoji added or taken off, and when); what an answer carries now is the last
change of each emoji. The rows go with the user (/forget) and with the answer.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import Integer, Select, bindparam, select
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from agent.core.clock import ensure_utc
from db.models import MessageReaction, TranscriptMessage, User

# How much of the answer the context quotes when it says what they reacted to.
QUOTE_CHARS = 80
# The oldest reaction the context still mentions.
RECENT = timedelta(hours=24)


@dataclass(frozen=True)
class RecentReaction:
    """An emoji the person put on an answer, and the answer."""

    emoji: str
    answer: str
    at: datetime


async def answer_for(session: AsyncSession, user_id: int, chat_message_id: int) -> int | None:
    """The transcript id of the answer the chat knows as `chat_message_id`, or None."""
    own = select(TranscriptMessage.id).where(
        TranscriptMessage.user_id == user_id,
        TranscriptMessage.role == "user",
        TranscriptMessage.telegram_message_id == chat_message_id,
    )
    if await session.scalar(own) is not None:
        return None  # the person reacted to their own message
    asked = (
        select(TranscriptMessage.id)
        .where(
            TranscriptMessage.user_id == user_id,
            TranscriptMessage.role == "user",
            TranscriptMessage.telegram_message_id < chat_message_id,
        )
        .order_by(TranscriptMessage.telegram_message_id.desc())
        .limit(1)
        .scalar_subquery()
    )
    answer = (
        select(TranscriptMessage.id)
        .where(
            TranscriptMessage.user_id == user_id,
            TranscriptMessage.role == "assistant",
            TranscriptMessage.reply_to_id == asked,
        )
        .order_by(TranscriptMessage.id)
        .limit(1)
    )
    return await session.scalar(answer)


async def record_reaction(
    sessions: async_sessionmaker[AsyncSession],
    user_key: str,
    chat_message_id: int,
    *,
    added: Iterable[str],
    removed: Iterable[str],
    at: datetime,
) -> int:
    """Store the emoji the user `user_key` ("telegram:<id>") put on and took off an answer; returns the
    rows stored (0: not an answer, or a person the bot does not know)."""
    changes = [(emoji, False) for emoji in removed] + [(emoji, True) for emoji in added]
    if not changes:
        return 0
    async with sessions() as session, session.begin():
        user_id = await session.scalar(select(User.id).where(User.key == user_key))
        if user_id is None:
            return 0
        message_id = await answer_for(session, user_id, chat_message_id)
        if message_id is None:
            return 0
        session.add_all(
            MessageReaction(user_id=user_id, message_id=message_id, emoji=emoji, added=on, reacted_at=at)
            for emoji, on in changes
        )
    return len(changes)


async def reactions_on(
    session: AsyncSession, user_id: int, message_ids: Sequence[int]
) -> dict[int, list[str]]:
    """The emoji each of these answers carries now (answers without any are left out)."""
    if not message_ids:
        return {}
    rows = await session.execute(
        select(MessageReaction.message_id, MessageReaction.emoji, MessageReaction.added)
        .where(MessageReaction.user_id == user_id, MessageReaction.message_id.in_(message_ids))
        .order_by(MessageReaction.id)
    )
    state: dict[int, dict[str, bool]] = {}
    for message_id, emoji, on in rows:
        state.setdefault(message_id, {})[emoji] = on
    return {mid: [e for e, on in emoji.items() if on] for mid, emoji in state.items() if any(emoji.values())}


@functools.cache
def _recent() -> Select[int, str, datetime]:
    # Built once: every turn's context reads it, and building it cost more than running it.
    return (
        select(MessageReaction.message_id, MessageReaction.emoji, MessageReaction.reacted_at)
        .where(
            MessageReaction.user_id == bindparam("user_id"),
            MessageReaction.added.is_(True),
            MessageReaction.reacted_at > bindparam("since"),
            MessageReaction.reacted_at <= bindparam("until"),
        )
        .order_by(MessageReaction.reacted_at.desc(), MessageReaction.id.desc())
        .limit(bindparam("limit", type_=Integer))
    )


async def recent_reactions(
    session: AsyncSession, user_id: int, *, since: datetime, until: datetime, limit: int = 3
) -> list[RecentReaction]:
    """Emoji put on answers between `since` and `until` and still on them, newest first."""
    params = {"user_id": user_id, "since": since, "until": until, "limit": limit * 4}
    rows = await session.execute(_recent(), params)
    found = list(rows)
    still = await reactions_on(session, user_id, sorted({row.message_id for row in found}))
    if not still:  # nothing to quote: no statement for an empty list of answers
        return []
    answers = dict(
        (
            await session.execute(
                select(TranscriptMessage.id, TranscriptMessage.content).where(
                    TranscriptMessage.id.in_(still), TranscriptMessage.user_id == user_id
                )
            )
        ).all()
    )
    recent: list[RecentReaction] = []
    for message_id, emoji, at in found:
        if emoji in still.get(message_id, ()) and message_id in answers and len(recent) < limit:
            recent.append(RecentReaction(emoji, answers[message_id], at))
    return recent


def with_reactions(content: str, emoji: Sequence[str] | None) -> str:
    """An answer as the transcript shows it to a reader: with the emoji the person put on it."""
    return f"{content} [they reacted {' '.join(emoji)}]" if emoji else content


def reaction_lines(reactions: Sequence[RecentReaction]) -> list[str]:
    """What the context says about recent reactions."""
    lines = []
    for reaction in reactions:
        quote = " ".join(reaction.answer.split())
        quote = quote if len(quote) <= QUOTE_CHARS else quote[: QUOTE_CHARS - 1] + "…"
        lines.append(f'They reacted {reaction.emoji} to your answer "{quote}".')
    return lines


async def reaction_notes(
    session: AsyncSession,
    user_id: int,
    now: datetime,
    previous_message_at: datetime | None,
) -> list[str]:
    """What the next turn's context says about reactions since the person last wrote (within a day):
    each reaction is told once, in the turn after it."""
    since = now - RECENT
    if previous_message_at is not None:
        since = max(since, ensure_utc(previous_message_at))
    return reaction_lines(await recent_reactions(session, user_id, since=since, until=now))
