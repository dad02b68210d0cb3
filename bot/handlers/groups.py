"""Group chats: the bot answers when it is addressed and otherwise listens; it joins, leaves and
follows a group that becomes a supergroup.

A group's memory is its own (agent/account/groups.py): every turn here runs with the group's owner
id, never a member's. Addressed means an @mention of the bot (or a text mention of it), a reply to
one of its messages, or its name as a word; commands have their own handlers
(bot/handlers/group_commands.py). Anything else is heard: stored with its speaker, no model call,
no answer. Photos, voice notes and files are stored as what they are ("[photo] caption"); the model
reads that line, not the file. An ephemeral message (seen only by its sender and the bot) is not
the group's conversation: it is neither heard nor answered here.

Only the group's Telegram admins change or remove its memory through the model (forget, correct, pin,
reword, cancel a reminder): the sender's standing (bot/handlers/admins.py) reaches the turn as a plain
permission. Addressed messages count against the group's own rate limit (GROUP_RATE_LIMIT_*), never a
member's: one over it is heard like any other, and the group is told once a window. The group's
turns are metered on its owner row, so GROUP_DAILY_TOKENS caps them.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime

from telegram import ChatMember, ChatMemberUpdated, Message, Update
from telegram.constants import ChatMemberStatus, MessageEntityType

from agent.account.groups import group_key, group_owner, move_group
from agent.account.ratelimit import Verdict
from agent.turn.transcript import Speaker
from bot.delivery.sending import typing
from bot.delivery.streaming import preview
from bot.handlers.context import HandlerContext, incoming
from bot.handlers.group_answers import ephemeral_id
from bot.handlers.messages import describe
from db.models import User
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

_PRESENT = frozenset({ChatMemberStatus.MEMBER, ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})


def hello(name: str, username: str) -> str:
    """What the bot says when it is added to a group."""
    return (
        f"Hi everyone, I'm {name}! To talk to me here, mention me (@{username}), reply to one of my "
        f"messages or say my name. I remember this group's conversation, here only: nothing from "
        "anyone's private chat with me comes here. A group admin can clear what I remember of this "
        "group with /forget. /help says more."
    )


def not_joining(name: str) -> str:
    """What the bot says before it leaves a group, where groups are turned off."""
    return f"Hi! I'm {name}, and I only talk in private chats. Write to me there; I'm leaving this group."


def addressed(message: Message, *, bot_id: int, username: str, name: str) -> bool:
    """Whether the message speaks to the bot: an @mention or text mention of it, a reply to one of its
    messages, or its name as a whole word in any case."""
    handle = f"@{username}".casefold()
    entities = message.parse_entities() or message.parse_caption_entities()
    for entity, value in entities.items():
        if entity.type == MessageEntityType.MENTION and value.casefold() == handle:
            return True
        if (
            entity.type == MessageEntityType.TEXT_MENTION
            and entity.user is not None
            and entity.user.id == bot_id
        ):
            return True
    reply = message.reply_to_message
    # In a forum every message of a topic replies to the topic's first message: not a reply to the bot.
    if (
        reply is not None
        and reply.from_user is not None
        and reply.from_user.id == bot_id
        and reply.forum_topic_created is None
    ):
        return True
    said = message.text or message.caption or ""
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", said, re.IGNORECASE) is not None


def speaker_of(message: Message) -> Speaker:
    """Who said it: the member, or the chat itself (an anonymous admin, a linked channel)."""
    if message.sender_chat is not None:
        return Speaker(None, (message.sender_chat.title or "Someone")[:200])
    person = message.from_user
    if person is None:
        return Speaker(None, "Someone")
    return Speaker(person.id, person.full_name[:200])


async def group_of(context: HandlerContext, chat_id: int, title: str | None, now: datetime) -> User:
    """The group's memory owner, created (no onboarding) on its first message."""
    runtime = context.services.runtime
    user, _ = await group_owner(
        runtime.sessions, chat_id=chat_id, title=title, now=now, timezone=runtime.settings.default_timezone
    )
    return user


async def on_group_message(update: Update, context: HandlerContext) -> None:
    """A member's message: a group turn when it is addressed to the bot, otherwise only heard."""
    message = update.effective_message
    s = context.services
    settings = s.runtime.settings
    if message is None or not settings.groups_enabled:
        return
    if ephemeral_id(message) is not None:
        # Seen by its sender and the bot only (Bot API 10.2): not the group's conversation, never stored.
        logger.info("an ephemeral message in a group left unheard", extra={"chat_id": message.chat_id})
        return
    if message.text is not None:
        kind, text = "text", message.text
    else:
        kind, text = describe(message)
    owner = await group_of(context, message.chat_id, message.chat.title, message.date)
    speaker, turns = speaker_of(message), s.runtime.turns
    me = context.bot
    verdict: Verdict | None = None
    if addressed(message, bot_id=me.id, username=me.username, name=settings.persona_name):
        # The group's messages to the bot count together, never against a member's own allowance.
        verdict = await s.limiter.check(
            group_key(message.chat_id), message.date, "group", once_for=message.message_id
        )
    if verdict is None or not verdict.allowed:
        # Heard: a message over the group's limit stays in its memory, like one not addressed.
        await turns.hear(incoming(message, owner, text, kind, speaker=speaker, may_change_memory=False))
        if verdict is not None and verdict.tell:
            # Once a window; the inbox sends it as a reply in the message's topic.
            context.row.answer(verdict.message, repeated=verdict.again)
        return
    row = context.row
    # Only the group's admins change or remove its memory through the model (Telegram's answer).
    admin = await s.admins.sender_is_admin(me, message)
    async with typing(me, message.chat_id), preview(me, message, settings, row) as progress:
        said = incoming(message, owner, text, kind, speaker=speaker, may_change_memory=admin)
        result = await turns.group_reply(said, progress=progress)
    # The inbox sends the answer, as a reply to this message in its topic.
    row.answer(result.text, repeated=result.duplicate)


def _present(member: ChatMember) -> bool:
    return member.status in _PRESENT or (
        member.status == ChatMemberStatus.RESTRICTED and bool(getattr(member, "is_member", False))
    )


async def on_my_chat_member(update: Update, context: HandlerContext) -> None:
    """The bot added to a group (a hello, or a note and leaving when groups are off) or removed from
    one (marked unreachable; nothing more is sent there)."""
    change: ChatMemberUpdated | None = update.my_chat_member
    if change is None or change.chat.type not in ("group", "supergroup"):
        return
    s = context.services
    settings, sessions = s.runtime.settings, s.runtime.sessions
    was, now_in = _present(change.old_chat_member), _present(change.new_chat_member)
    chat_id = change.chat.id
    if now_in and not was:
        if not settings.groups_enabled:
            await context.bot.send_message(chat_id=chat_id, text=not_joining(settings.persona_name))
            await context.bot.leave_chat(chat_id)
            logger.info("left a group: groups are off", extra={"chat_id": chat_id})
            return
        owner = await group_of(context, chat_id, change.chat.title, change.date)
        async with sessions() as session, session.begin():
            stored = await session.get(User, owner.id)
            if stored is not None:
                stored.unreachable_at = None
        # The inbox sends it, as it sends every answer.
        context.row.answer(hello(settings.persona_name, context.bot.username))
        logger.info("added to a group", extra={"user_id": owner.id})
    elif was and not now_in:
        async with sessions() as session, session.begin():
            stored = await UserRepository(session).by_chat_id(chat_id)
            if stored is not None:
                stored.unreachable_at = change.date
        logger.info("removed from a group", extra={"chat_id": chat_id})


async def on_migrate(update: Update, context: HandlerContext) -> None:
    """A group became a supergroup (a new chat id): its memory moves with it."""
    message = update.effective_message
    if message is None:
        return
    if message.migrate_to_chat_id is not None:
        old, new = message.chat_id, message.migrate_to_chat_id
    elif message.migrate_from_chat_id is not None:
        old, new = message.migrate_from_chat_id, message.chat_id
    else:
        return
    if await move_group(context.services.runtime.sessions, old, new):
        logger.info("group moved to a supergroup", extra={"old_chat_id": old, "new_chat_id": new})
