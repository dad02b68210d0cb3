"""Whether a group member administers the group: Telegram's own answer (getChatMember).

Changing or removing a group's memory is for its admins, whether through /memory's buttons, /forget
or by asking the bot (the memory tools that change something get the answer as the turn's plain
permission, agent/chat/deps.py). An anonymous admin speaks as the group itself and is one. Not
knowing (Telegram failing) is not being an admin.

A command or a button press (/forget, /timezone, /memory's buttons) asks each time: they are rare,
and /forget cannot be undone. A turn asks through `GroupAdmins`, which keeps each answer for
`ADMIN_TTL` by the injected clock, so a busy group's addressed messages do not each cost a Bot API
call; a promotion or demotion holds there within that time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from telegram import Bot, Message
from telegram.constants import ChatMemberStatus
from telegram.error import TelegramError

from agent.core.bounded import BoundedCache
from agent.core.clock import Clock

ADMINS = frozenset({ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER})
ADMIN_TTL = timedelta(seconds=60)
# (chat, member) answers kept at once; more are asked again.
MAX_ANSWERS = 4096


async def asked_admin(bot: Bot, chat_id: int, user_id: int) -> bool:
    """Telegram's answer, asked now: whether `user_id` administers the chat (False when unknown)."""
    try:
        member = await bot.get_chat_member(chat_id, user_id)
    except TelegramError:
        return False
    return member.status in ADMINS


def speaks_as_the_group(message: Message) -> bool:
    """An anonymous admin's message: sent as the group itself."""
    return message.sender_chat is not None and message.sender_chat.id == message.chat_id


async def is_group_admin(bot: Bot, message: Message) -> bool:
    """Whether the message's sender administers its group, asked now (for what cannot be undone)."""
    if speaks_as_the_group(message):
        return True
    person = message.from_user
    return person is not None and await asked_admin(bot, message.chat_id, person.id)


class GroupAdmins:
    """Telegram's answers to "does this member administer this group?", each kept for `ttl`."""

    def __init__(self, clock: Clock, *, ttl: timedelta = ADMIN_TTL) -> None:
        self.clock = clock
        self.ttl = ttl
        self._answers: BoundedCache[tuple[int, int], tuple[bool, datetime]] = BoundedCache(
            max_entries=MAX_ANSWERS
        )

    async def sender_is_admin(self, bot: Bot, message: Message) -> bool:
        """Whether the message's sender administers its group (asked of Telegram at most once a `ttl`)."""
        if speaks_as_the_group(message):
            return True
        person = message.from_user
        if person is None:
            return False
        key, now = (message.chat_id, person.id), self.clock.now()
        kept = self._answers.get(key)
        if kept is not None and now - kept[1] < self.ttl:
            return kept[0]
        try:
            member = await bot.get_chat_member(message.chat_id, person.id)
        except TelegramError:
            return False  # not kept: asked again next time
        answer = member.status in ADMINS
        self._answers.put(key, (answer, now))
        return answer
