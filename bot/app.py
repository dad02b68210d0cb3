"""The Telegram application: built once from the runtime, run by long polling or behind a webhook."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from telegram import BotCommand, BotCommandScopeAllGroupChats, Update
from telegram.error import BadRequest
from telegram.ext import (
    ApplicationBuilder,
    CallbackQueryHandler,
    ChatMemberHandler,
    CommandHandler,
    ContextTypes,
    MessageHandler,
    MessageReactionHandler,
    TypeHandler,
    filters,
)

from agent.account.access import AccessPolicy
from agent.account.ratelimit import RateLimiter
from agent.core.errors import ConfigurationError
from agent.core.model_lifecycle import model_warnings
from agent.core.observability.setup import start_sampler, stop_sampler
from agent.core.settings import Settings
from bot.delivery.runner import DeliveryRunner, build_delivery
from bot.delivery.sending import GroupPace
from bot.delivery.signals import SignalFreeServer, on_stop_signal
from bot.delivery.touchpoints import TelegramMessenger
from bot.handlers import (
    access,
    admin,
    commands,
    group_commands,
    groups,
    imports,
    media,
    memory_facts,
    messages,
    reactions,
    reminders,
    touchpoints,
)
from bot.handlers.admins import GroupAdmins
from bot.handlers.context import HandlerContext
from bot.handlers.group_forget import on_group_forget
from bot.preflight import listen, one_line, preflight
from bot.runtime import STARTUP_PATIENCE_SECONDS, Runtime, build_runtime
from bot.services import AnyApplication, BotData, BotServices, services_of
from bot.web.app import build_web_app
from bot.web.server import server_config
from bot.web.timeline import command as timeline_command
from db.migrate import upgrade_unless_at_head
from jobs.scheduler import schedule_jobs

logger = logging.getLogger(__name__)

# Updates the bot asks Telegram for; everything else is never delivered.
ALLOWED_UPDATES = [
    "message",
    "edited_message",
    "channel_post",
    "callback_query",
    "message_reaction",
    "stopped_message_generation",
    "my_chat_member",
]


def build_application(runtime: Runtime, *, webhook: bool | None = None) -> AnyApplication:
    """The python-telegram-bot Application with every handler registered (here and only here)."""
    settings = runtime.settings
    settings.require("telegram_bot_token")
    assert settings.telegram_bot_token is not None
    use_webhook = bool(settings.webhook_url) if webhook is None else webhook
    # No Updater in either mode: updates arrive through the inbox (bot/delivery), which polls itself.
    application = (
        ApplicationBuilder()
        .token(settings.telegram_bot_token.get_secret_value())
        .base_url(settings.telegram_api_base_url)
        .base_file_url(settings.telegram_files_url)
        .updater(None)
        # At most GROUP_MESSAGES_PER_MINUTE new messages into one group chat (bot/delivery/sending.py).
        .rate_limiter(GroupPace(settings.group_messages_per_minute))
        # Handlers read `context.services` and `context.row` (bot/handlers/context.py).
        .context_types(ContextTypes(context=HandlerContext, bot_data=BotData))
        .post_init(_post_init)
        .post_shutdown(_post_shutdown)
        .build()
    )
    data: BotData = application.bot_data
    data.services = BotServices(
        runtime=runtime,
        limiter=RateLimiter.from_settings(runtime.sessions, settings),
        access=AccessPolicy.from_settings(runtime.sessions, settings, runtime.clock),
        admins=GroupAdmins(runtime.clock),
        delivery=build_delivery(
            application,
            settings,
            runtime.sessions,
            runtime.clock,
            single_process=runtime.engine.dialect.name == "sqlite",
            webhook=use_webhook,
            allowed_updates=ALLOWED_UPDATES,
        ),
    )
    data.webhook = use_webhook
    _register(application, settings)
    return application


def _register(application: AnyApplication, settings: Settings) -> None:
    private = filters.ChatType.PRIVATE
    # Before every other handler: strangers under ACCESS=allowlist and denied people stop here. A
    # group of its own: it matches every update, so it would shadow anything else in its group.
    application.add_handler(TypeHandler(Update, access.gate), group=access.GATE_GROUP)
    application.add_handler(
        MessageHandler(filters.UpdateType.EDITED | filters.UpdateType.CHANNEL_POSTS, messages.on_ignored)
    )
    user_commands = {
        "start": messages.on_start,
        "skip": messages.on_skip,
        "help": commands.on_help,
        "memory": memory_facts.on_memory,
        "timezone": commands.on_timezone,
        "language": commands.on_language,
        "export": commands.on_export,
        "forget": commands.on_forget,
        "timeline": timeline_command.on_timeline,
        "followups": touchpoints.on_followups,
        "reminders": reminders.on_reminders,
    }
    for name, callback in user_commands.items():
        application.add_handler(CommandHandler(name, callback, filters=private))
    # Only admins match these; anyone else falls through to the unknown-command answer.
    admins = filters.User(user_id=settings.admin_ids) & private
    admin_commands = {
        "stats": admin.on_stats,
        "user": admin.on_user,
        "prompt": admin.on_prompt,
        "reprocess": admin.on_reprocess,
        "jobs": admin.on_jobs,
        "allow": admin.on_allow,
        "deny": admin.on_deny,
        "access": admin.on_access,
    }
    for name, callback in admin_commands.items():
        application.add_handler(CommandHandler(name, callback, filters=admins))
    application.add_handler(CallbackQueryHandler(commands.on_forget_button, pattern=r"^forget:"))
    application.add_handler(CommandHandler("forget", on_group_forget, filters=filters.ChatType.GROUPS))
    application.add_handler(CallbackQueryHandler(touchpoints.on_followups_button, pattern=r"^followups:"))
    application.add_handler(CallbackQueryHandler(reminders.on_reminder_button, pattern=r"^reminder:"))
    application.add_handler(CallbackQueryHandler(memory_facts.on_fact_button, pattern=r"^memfact:"))
    application.add_handler(CallbackQueryHandler(imports.on_import_button, pattern=r"^import:"))
    application.add_handler(MessageReactionHandler(reactions.on_reaction))
    application.add_handler(MessageHandler(filters.COMMAND & private, messages.on_unknown_command))
    application.add_handler(MessageHandler(filters.TEXT & private, messages.on_text))
    application.add_handler(MessageHandler(filters.PHOTO & private, media.on_photo))
    application.add_handler(MessageHandler(filters.Document.ALL & private, media.on_document))
    application.add_handler(MessageHandler(filters.VOICE & private, media.on_voice_note))
    application.add_handler(
        MessageHandler(private & ~filters.TEXT & ~filters.StatusUpdate.ALL, messages.on_other)
    )
    _register_groups(application, settings)
    application.add_error_handler(messages.on_error)


def _register_groups(application: AnyApplication, settings: Settings) -> None:
    # Joining and leaving are heard even with groups off: the bot then says so and leaves.
    application.add_handler(ChatMemberHandler(groups.on_my_chat_member, ChatMemberHandler.MY_CHAT_MEMBER))
    if not settings.groups_enabled:
        return
    in_group = filters.ChatType.GROUPS
    application.add_handler(MessageHandler(filters.StatusUpdate.MIGRATE & in_group, groups.on_migrate))
    group_commands_ = {
        "help": group_commands.on_group_help,
        "timezone": group_commands.on_group_timezone,
        "memory": group_commands.on_group_memory,
    }
    for name, callback in group_commands_.items():
        application.add_handler(CommandHandler(name, callback, filters=in_group))
    application.add_handler(
        CommandHandler(group_commands.PRIVATE_ONLY, group_commands.on_private_only, filters=in_group)
    )
    # Everything else a member says (other bots' commands too): answered when addressed, else heard.
    application.add_handler(MessageHandler(in_group & ~filters.StatusUpdate.ALL, groups.on_group_message))


async def _post_init(application: AnyApplication) -> None:
    s = services_of(application)
    settings = s.runtime.settings
    await application.bot.set_my_commands([BotCommand(name, text) for name, text in commands.USER_COMMANDS])
    # Groups get their own menu, whose ephemeral commands answer the asker alone; none with groups off.
    in_groups = BotCommandScopeAllGroupChats()
    if settings.groups_enabled:
        await application.bot.set_my_commands(group_commands.group_menu(), scope=in_groups)
    else:
        await application.bot.delete_my_commands(scope=in_groups)
    await timeline_command.point_menu_button(application.bot, settings)
    if application.bot_data.webhook:
        assert settings.webhook_url is not None and settings.webhook_secret is not None
        try:
            await application.bot.set_webhook(
                url=settings.webhook_url,
                secret_token=settings.webhook_secret.get_secret_value(),
                allowed_updates=ALLOWED_UPDATES,
            )
        except BadRequest as exc:
            raise ConfigurationError(
                f"Telegram refused the webhook {settings.webhook_url} ({one_line(exc)}): check WEBHOOK_URL "
                "(a public https:// address ending in /telegram/webhook) and WEBHOOK_SECRET"
            ) from exc
        logger.info("webhook registered", extra={"url": settings.webhook_url})
    # The touchpoints job sends touchpoints and reminders through this bot (jobs never import the bot).
    s.runtime.jobs.messenger = TelegramMessenger(application.bot)
    # Imports tell their chat how they go; the ones a stop interrupted carry on in the background.
    s.runtime.imports.notes = imports.TelegramImportNotes(application.bot, s.runtime)
    s.runtime.imports.spawn(imports.resume_imports(s.runtime, application.bot), "resume imports")
    # The inbox and job gauges of the metrics, when they are on (agent/core/observability).
    start_sampler(s.runtime.sessions, s.runtime.clock)
    if application.job_queue is not None:
        schedule_jobs(application.job_queue.scheduler, s.runtime.jobs)


async def _post_shutdown(application: AnyApplication) -> None:
    await stop_sampler()
    await services_of(application).runtime.close()


@asynccontextmanager
async def running(
    application: AnyApplication, *, poll_timeout: int | None = None
) -> AsyncIterator[DeliveryRunner]:
    """Initialise, run post_init, start the inbox (and polling, without a webhook); undo it all after.

    Leaving the block stops the intake and drains the inbox within SHUTDOWN_GRACE_SECONDS.
    """
    runner = services_of(application).delivery
    if poll_timeout is not None and runner.poller is not None:
        runner.poller.timeout = poll_timeout
    async with application:
        assert application.post_init is not None
        await application.post_init(application)
        await application.start()
        runner.start()
        try:
            yield runner
        finally:
            await runner.stop()
            logger.info("inbox stopped; stopping the application")
            await application.stop()
    if application.post_shutdown is not None:
        await application.post_shutdown(application)
    logger.info("stopped")


async def serve(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT: long polling, or the webhook on $PORT when WEBHOOK_URL is set.

    Polling with $PORT given (Cloud Run, Heroku) serves the web app there too, without the webhook
    route. The start-up checks come first, so a failing one leaves nothing to clean up; anything
    failing after them still closes the runtime (the embedded graph's server with it).
    """
    await preflight(settings)
    listener = listen(settings.web_port) if settings.webhook_url or settings.port is not None else None
    try:
        stop = asyncio.Event()
        on_stop_signal(stop.set)  # a stop during start-up stops the bot once it has started
        # In a child process (the migration machinery never stays resident in the serving process),
        # and only when the database is behind: a restart's usual check is one query.
        await upgrade_unless_at_head(settings.database_url)
        runtime = await build_runtime(settings, migrate=False)
        for warning in model_warnings(settings, runtime.clock.now().date()):
            logger.warning(warning)
        try:
            await _serve_runtime(runtime, stop, listener)
        finally:
            await runtime.close()
    finally:
        if listener is not None:
            listener.close()


async def _serve_runtime(runtime: Runtime, stop: asyncio.Event, listener: socket.socket | None) -> None:
    settings = runtime.settings
    application = build_application(runtime)
    if listener is None:
        async with running(application) as runner:
            logger.info("polling for updates")
            runtime.start_up(caught_up(runner))  # after the updates already waiting, between turns
            await stop.wait()
        return
    webhook = bool(settings.webhook_url)
    web = build_web_app(application, runtime, webhook=webhook)
    server = SignalFreeServer(server_config(web, timeout_graceful_shutdown=2))
    async with running(application) as runner:
        what = "serving webhook" if webhook else "polling for updates; serving HTTP"
        logger.info(what, extra={"port": settings.web_port})
        served = asyncio.create_task(server.serve(sockets=[listener]))
        runtime.start_up(caught_up(runner))
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait({served, stopping}, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        # Both at once: the web server stops taking requests while the inbox drains (the grace
        # period counts from the signal, so the whole stop fits the host's kill delay).
        server.should_exit = True
        await asyncio.gather(served, runner.stop())


def caught_up(runner: DeliveryRunner) -> Callable[[], Awaitable[bool]]:
    """What the start-up work waits for first: the updates waiting at start are stored (the poller's
    first batch; a webhook's arrive on their own) and the inbox has nothing claimable or in flight."""

    async def wait() -> bool:
        if runner.poller is not None:
            await runner.poller.caught_up.wait()
        return await runner.dispatcher.drain(within=STARTUP_PATIENCE_SECONDS)

    return wait


__all__ = ["build_application", "running", "serve"]
