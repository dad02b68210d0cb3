"""Admin commands, registered only for ADMIN_IDS: everyone else gets the unknown-command answer."""

from __future__ import annotations

from telegram import Update

from agent.account.access import Rule
from agent.core.access_keys import access_key, is_id
from agent.reports.texts import access_report, prompt_report, stats_report, user_report
from bot.delivery.sending import send_text
from bot.handlers.context import HandlerContext
from bot.web.dashboard.command import OPEN_TEXT, dashboard_button
from jobs.queue import queue_stats, requeue


def _one_int(args: list[str] | None) -> int | None:
    if not args or len(args) != 1:
        return None
    try:
        return int(args[0])
    except ValueError:
        return None


async def on_stats(update: Update, context: HandlerContext) -> None:
    """/stats: people and groups, active today, conversations, messages, job queue, failures, model use;
    then a button that opens the dashboard's charts (with WEBAPP_URL)."""
    if update.effective_message is None:
        return
    s = context.services
    queue = await queue_stats(s.runtime.sessions)
    report = await stats_report(
        s.runtime.sessions,
        update.effective_message.date,
        queue_depth=queue.queued + queue.processing,
        failures=queue.failed,
        settings=s.runtime.settings,
    )
    await send_text(context.bot, update.effective_message.chat_id, report)
    if (button := dashboard_button(s.runtime.settings)) is not None:
        await update.effective_message.reply_text(OPEN_TEXT, reply_markup=button)


async def on_user(update: Update, context: HandlerContext) -> None:
    """/user <telegram id or group chat id>: profile, counts, last activity, model use per day."""
    if update.effective_message is None:
        return
    telegram_id = _one_int(context.args)
    text = (
        "Usage: /user <telegram id or group chat id>"
        if telegram_id is None
        else await user_report(context.services.runtime.sessions, telegram_id, update.effective_message.date)
    )
    await send_text(context.bot, update.effective_message.chat_id, text)


async def on_prompt(update: Update, context: HandlerContext) -> None:
    """/prompt <telegram id or group chat id>: the last context snapshot (tiers, tokens, what was cut)."""
    if update.effective_message is None:
        return
    telegram_id = _one_int(context.args)
    text = (
        "Usage: /prompt <telegram id or group chat id>"
        if telegram_id is None
        else await prompt_report(context.services.runtime.sessions, telegram_id)
    )
    await send_text(context.bot, update.effective_message.chat_id, text)


async def on_reprocess(update: Update, context: HandlerContext) -> None:
    """/reprocess <conversation id>: queue a closed conversation for post-processing again."""
    message = update.effective_message
    if message is None:
        return
    conversation_id = _one_int(context.args)
    if conversation_id is None:
        text = "Usage: /reprocess <conversation id>"
    elif await requeue(context.services.runtime.sessions, conversation_id, message.date):
        text = f"Conversation {conversation_id} is queued for post-processing."
    else:
        text = f"Conversation {conversation_id} does not exist or is still active."
    await send_text(context.bot, message.chat_id, text)


async def on_jobs(update: Update, context: HandlerContext) -> None:
    """/jobs: the post-processing queue and due day summaries."""
    if update.effective_message is None:
        return
    stats = await queue_stats(context.services.runtime.sessions)
    await send_text(context.bot, update.effective_message.chat_id, stats.format())


async def on_allow(update: Update, context: HandlerContext) -> None:
    """/allow <id|@username|group chat id>: let them use the bot (under ACCESS=allowlist; lifts a /deny)."""
    await _set_rule(update, context, "allow")


async def on_deny(update: Update, context: HandlerContext) -> None:
    """/deny <id|@username|group chat id>: block them, in either access mode (admins excepted)."""
    await _set_rule(update, context, "deny")


async def _set_rule(update: Update, context: HandlerContext, rule: Rule) -> None:
    message, person = update.effective_message, update.effective_user
    if message is None or person is None:
        return
    s = context.services
    key = access_key(context.args[0]) if context.args and len(context.args) == 1 else None
    if key is None:
        text = f"Usage: /{rule} <telegram id, @username or group chat id>"
    elif rule == "deny" and is_id(key) and int(key) in s.access.admins:
        text = f"{key} is an admin (ADMIN_IDS) and always allowed."
    else:
        await s.access.set_rule(key, rule, by=person.id)
        shown = key if is_id(key) else f"@{key}"
        text = f"{shown} is {'allowed' if rule == 'allow' else 'denied'} from now on."
        if rule == "allow" and s.access.mode == "open":
            text += " (ACCESS is open: everyone not denied may use the bot anyway.)"
    await send_text(context.bot, message.chat_id, text)


async def on_access(update: Update, context: HandlerContext) -> None:
    """/access: the access mode, the admins, ALLOWED_USERS and the /allow and /deny rules."""
    if update.effective_message is None:
        return
    listing = await context.services.access.listing()
    await send_text(context.bot, update.effective_message.chat_id, access_report(listing))
