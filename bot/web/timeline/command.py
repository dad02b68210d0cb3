"""How the timeline is opened from Telegram: the /timeline button and the chat's menu button."""

from __future__ import annotations

import logging

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, MenuButtonWebApp, Update, WebAppInfo

from agent.core.settings import Settings
from bot.delivery.sending import send_text
from bot.handlers.context import HandlerContext

logger = logging.getLogger(__name__)

OPEN_TEXT = "Your timeline: every day with its summary, the whole conversation, and search."
BUTTON_TEXT = "Open the timeline"
MENU_TEXT = "Timeline"
NOT_SET_UP = (
    "The timeline isn't set up on this bot yet (whoever runs me sets WEBAPP_URL). "
    "Until then, /memory shows what I remember."
)


async def on_timeline(update: Update, context: HandlerContext) -> None:
    """/timeline: a button that opens the timeline Mini App."""
    message = update.effective_message
    if message is None:
        return
    url = context.services.runtime.settings.webapp_url
    if url is None:
        await send_text(context.bot, message.chat_id, NOT_SET_UP)
        return
    button = InlineKeyboardButton(BUTTON_TEXT, web_app=WebAppInfo(url=url))
    await message.reply_text(OPEN_TEXT, reply_markup=InlineKeyboardMarkup([[button]]))


async def point_menu_button(bot: Bot, settings: Settings) -> None:
    """At start: the chat's menu button opens the timeline when WEBAPP_URL is set."""
    if settings.webapp_url is None:
        return
    button = MenuButtonWebApp(MENU_TEXT, WebAppInfo(url=settings.webapp_url))
    await bot.set_chat_menu_button(menu_button=button)
    logger.info("menu button opens the timeline", extra={"url": settings.webapp_url})
