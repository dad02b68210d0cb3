"""/forget inside a group: only a Telegram admin of the group may delete the group's memory.

The deletion itself is Telegram-free (agent/account/group_forget.py and `Runtime.forget` on the
group's owner row); this module checks who asks and answers in the group.
"""

from __future__ import annotations

import logging

from telegram import Update
from telegram.constants import ChatMemberStatus

from agent.account.group_forget import group_owner_id
from bot.delivery.sending import send_text
from bot.handlers.context import HandlerContext

logger = logging.getLogger(__name__)

ADMINS = {ChatMemberStatus.ADMINISTRATOR, ChatMemberStatus.OWNER}
GROUP_FORGET_ASK = (
    "This deletes everything I remember of this group: its conversations, summaries and facts. "
    "Members' private chats with me are not touched. It cannot be undone. An admin of the group "
    "can confirm with /forget confirm."
)
GROUP_FORGET_ADMINS_ONLY = "Only an admin of this group can make me forget it."
GROUP_FORGOTTEN = "Done. I've forgotten everything about this group."


async def on_group_forget(update: Update, context: HandlerContext) -> None:
    """/forget in a group: asks first; /forget confirm by an admin of the group deletes its memory."""
    message, person, chat = update.effective_message, update.effective_user, update.effective_chat
    if message is None or person is None or chat is None:
        return
    member = await context.bot.get_chat_member(chat.id, person.id)
    if member.status not in ADMINS:
        await send_text(context.bot, chat.id, GROUP_FORGET_ADMINS_ONLY)
        return
    if [a.lower() for a in context.args or []] != ["confirm"]:
        await send_text(context.bot, chat.id, GROUP_FORGET_ASK)
        return
    runtime = context.services.runtime
    owner = await group_owner_id(runtime.sessions, chat.id)
    if owner is not None:
        result = await runtime.forget(owner)
        logger.info("group forgotten", extra={"user_id": owner, "stores_pending": len(result.stores_pending)})
    await send_text(context.bot, chat.id, GROUP_FORGOTTEN)
