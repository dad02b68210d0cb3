"""Commands in a group chat: /help, /timezone (the group's Telegram admins only) and /memory (the
group's memory, never a member's). The commands about a person's own data answer that they work in
a private chat.

The group's command menu (GROUP_COMMANDS) marks the commands whose answer is for the asker alone as
ephemeral: picked from it in a current Telegram app, they are answered to that person only
(bot/handlers/group_answers.py). /memory is the group's and answers everyone."""

from __future__ import annotations

from telegram import BotCommand, Update

from bot.handlers.admins import is_group_admin
from bot.handlers.commands import timezone_answer
from bot.handlers.context import HandlerContext
from bot.handlers.group_answers import answer_command
from bot.handlers.groups import group_of
from bot.handlers.memory_facts import memory_messages

# The private chat's commands that are about one person (their data, their settings).
PRIVATE_ONLY = ("start", "skip", "language", "export", "timeline", "followups", "reminders")
# The group chats' command menu: (command, description, ephemeral). An ephemeral command's answer is
# for the asker alone: how the bot works, a time zone shown or set, /forget's warning or refusal.
GROUP_COMMANDS: tuple[tuple[str, str, bool], ...] = (
    ("help", "how I work in this group", True),
    ("memory", "what I remember of this group", False),
    ("timezone", "show or set this group's time zone (group admins)", True),
    ("forget", "clear what I remember of this group (group admins)", True),
)


def group_menu() -> list[BotCommand]:
    """GROUP_COMMANDS for setMyCommands, with Bot API 10.2's is_ephemeral (python-telegram-bot lacks it)."""
    return [
        BotCommand(name, text, api_kwargs={"is_ephemeral": True} if ephemeral else None)
        for name, text, ephemeral in GROUP_COMMANDS
    ]


def group_help(name: str, username: str) -> str:
    """/help in a group."""
    return "\n".join(
        [
            f"I'm {name}. In this group I answer when you mention me (@{username}), reply to one of my "
            "messages or say my name; otherwise I just listen.",
            "I remember this group's conversation and who said what, here only: nothing from anyone's "
            "private chat with me comes here, and this group's talk stays out of private chats.",
            "",
            *(f"/{command} - {text}" for command, text, _ in GROUP_COMMANDS if command != "help"),
            "",
            "Everything else (your own memory, export, reminders) works in a private chat with me: "
            f"@{username}",
        ]
    )


async def on_group_help(update: Update, context: HandlerContext) -> None:
    """/help in a group: how to talk to the bot there and what it remembers."""
    name = context.services.runtime.settings.persona_name
    await answer_command(context, update, group_help(name, context.bot.username))


async def on_private_only(update: Update, context: HandlerContext) -> None:
    """A command about a person's own data, sent in a group: it works in a private chat."""
    await answer_command(
        context,
        update,
        f"That one works in a private chat with me: @{context.bot.username}",
    )


async def on_group_timezone(update: Update, context: HandlerContext) -> None:
    """/timezone [place] in a group: show the group's time zone; its admins may set it."""
    message = update.effective_message
    if message is None:
        return
    runtime = context.services.runtime
    group = await group_of(context, message.chat_id, message.chat.title, message.date)
    wanted = " ".join(context.args or [])
    if not wanted:
        text = f"This group's time zone is {group.timezone}. A group admin can change it: /timezone Lisbon"
    elif not await is_group_admin(context.bot, message):
        text = "Only this group's admins can change its time zone."
    else:
        text = await timezone_answer(runtime.sessions, group, wanted, group=True)
    await answer_command(context, update, text)


async def on_group_memory(update: Update, context: HandlerContext) -> None:
    """/memory in a group: what the bot remembers of this group, never of a member, its facts with
    buttons its admins may press (bot/handlers/memory_facts.py)."""
    message = update.effective_message
    if message is None:
        return
    group = await group_of(context, message.chat_id, message.chat.title, message.date)
    for text, markup in await memory_messages(context.services.runtime, group, group=True):
        await answer_command(context, update, text, reply_markup=markup)
