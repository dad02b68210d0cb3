"""Reactions to the bot's answers: remembered beside the answer (agent/history/reactions.py), never
answered. They come only because `message_reaction` is named in allowed_updates."""

from __future__ import annotations

import logging

from telegram import ReactionType, ReactionTypeCustomEmoji, ReactionTypeEmoji, Update
from telegram.constants import ChatType

from agent.history.reactions import record_reaction
from bot.handlers.context import HandlerContext
from bot.services import telegram_identity

logger = logging.getLogger(__name__)


def emoji_of(reaction: ReactionType) -> str:
    """The stored name of a reaction: the emoji, "custom:<id>" or "paid"."""
    if isinstance(reaction, ReactionTypeEmoji):
        return str(reaction.emoji)
    if isinstance(reaction, ReactionTypeCustomEmoji):
        return f"custom:{reaction.custom_emoji_id}"
    return "paid"


async def on_reaction(update: Update, context: HandlerContext) -> None:
    """A person changed their reaction to a message in their private chat: stored, no reply."""
    changed = update.message_reaction
    person = changed.user if changed is not None else None
    if changed is None or person is None or changed.chat.type != ChatType.PRIVATE:
        return
    s = context.services
    # Counted like any message (a flood of reactions is limited too), never as a model call.
    if await s.over_limit(context.bot, person, changed.chat.id, changed.date):
        return
    old = {emoji_of(r) for r in changed.old_reaction}
    new = {emoji_of(r) for r in changed.new_reaction}
    stored = await record_reaction(
        s.runtime.sessions,
        telegram_identity(person),
        changed.message_id,
        added=sorted(new - old),
        removed=sorted(old - new),
        at=changed.date,
    )
    logger.info("reaction", extra={"stored": stored, "message_id": changed.message_id})
