"""/forget inside a group: only a Telegram admin of the group may delete the group's memory.

The deletion itself is Telegram-free (agent/account/group_forget.py and `Runtime.forget` on the
group's owner row); this module checks who asks and answers in the group. The warning and the
refusal are for the asker alone when /forget came as an ephemeral command
(bot/handlers/group_answers.py); that the group's memory is gone concerns everyone, so the group sees it.
"""

from __future__ import annotations

import logging

from telegram import Update

from agent.account.group_forget import group_owner_id
from bot.handlers.admins import is_group_admin
from bot.handlers.context import HandlerContext
from bot.handlers.group_answers import answer_command

logger = logging.getLogger(__name__)

GROUP_FORGET_ASK = (
    "This deletes everything I remember of this group: its conversations, summaries and facts. "
    "Members' private chats with me are not touched. It cannot be undone. An admin of the group "
    "can confirm with /forget confirm."
)
GROUP_FORGET_ADMINS_ONLY = "Only an admin of this group can make me forget it."
GROUP_FORGOTTEN = "Done. I've forgotten everything about this group."


async def on_group_forget(update: Update, context: HandlerContext) -> None:
    """/forget in a group: asks first; /forget confirm by an admin of the group deletes its memory."""
    message = update.effective_message
    if message is None:
        return
    if not await is_group_admin(context.bot, message):
        await answer_command(context, update, GROUP_FORGET_ADMINS_ONLY)
        return
    if [a.lower() for a in context.args or []] != ["confirm"]:
        await answer_command(context, update, GROUP_FORGET_ASK)
        return
    runtime = context.services.runtime
    owner = await group_owner_id(runtime.sessions, message.chat_id)
    if owner is not None:
        result = await runtime.forget(owner)
        logger.info("group forgotten", extra={"user_id": owner, "stores_pending": len(result.stores_pending)})
    await answer_command(context, update, GROUP_FORGOTTEN, public=True)
