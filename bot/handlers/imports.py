"""An export of another assistant's history (ChatGPT, Claude) sent in the private chat: previewed,
then imported in the background on the person's Import press.

A .zip, or a .json that looks like an export (bot/importing.py), is downloaded to DATA_DIR/imports
and previewed without storing anything; the answer says what it holds and what importing costs,
with Import and Cancel buttons (`import:<go|no>:<run id>`). Only the person who sent the file can
press them: the run is looked for among the presser's own runs, in their own chat. Import starts a
task (bot/importing.py's `ImportRunner`), so the chat goes on answering meanwhile; one message is
edited with the progress and a last one says what was stored. Files over Telegram's 20 MB download
limit get a button to the timeline's "Bring your history" page instead. In a group, an export is a
file like any other there: never downloaded, never imported.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from pathlib import Path, PurePosixPath

from telegram import Bot, InlineKeyboardButton, InlineKeyboardMarkup, Update, WebAppInfo
from telegram.constants import ChatType
from telegram.error import BadRequest, TelegramError

from agent.account.imports import (
    ImportFileError,
    ImportProgress,
    ImportResult,
    begin_import,
    cancel_import,
    preview_import,
)
from agent.core.clock import ensure_utc
from bot.delivery.sending import drop_buttons, send_text
from bot.handlers.context import HandlerContext, sender
from bot.importing import (
    NOTHING_NEW,
    drop_staged,
    existing_file,
    file_of,
    found_text,
    is_export_name,
    keep,
    looks_like_export,
    nothing_new,
    progress_text,
    remove,
    staging_path,
    stored_text,
)
from bot.runtime import Runtime
from db.models import ImportRun, User
from db.repositories.import_runs import ImportRunRepository
from db.repositories.users import UserRepository

logger = logging.getLogger(__name__)

PREFIX = "import"
# Bots may download files of at most 20 MB (https://core.telegram.org/bots/api#getfile).
DOWNLOAD_LIMIT = 20 * 1024 * 1024
TOO_BIG = (
    "That file is bigger than the 20 MB Telegram lets me download. Upload it on the "
    '"Bring your history" page instead:'
)
TOO_BIG_NO_PAGE = (
    "That file is bigger than the 20 MB Telegram lets me download, and the upload page for bigger "
    "ones isn't set up on this bot (whoever runs me sets WEBAPP_URL)."
)
UPLOAD_BUTTON = "Bring your history"
CANCELLED = "Cancelled: nothing from that file was stored."
NOT_YOURS = "This button belongs to someone else's import."
GONE = "That import is no longer there."
ALREADY = "That import is already running or done."
STARTED = "Importing…"
LOST_FILE = "I no longer have that file. Could you send it again?"
# How often, at least, interrupted runs are looked for (their lease decides when one is resumed).
RESUME_EVERY_SECONDS = 5.0


def import_buttons(import_id: int) -> InlineKeyboardMarkup:
    """Import and Cancel under a preview."""
    return InlineKeyboardMarkup(
        [
            [
                InlineKeyboardButton("Import", callback_data=f"{PREFIX}:go:{import_id}"),
                InlineKeyboardButton("Cancel", callback_data=f"{PREFIX}:no:{import_id}"),
            ]
        ]
    )


def parse_press(data: str | None) -> tuple[str, int] | None:
    """(go|no, run id) of an import button's data; None for anything else."""
    parts = (data or "").split(":")
    if len(parts) != 3 or parts[0] != PREFIX or parts[1] not in ("go", "no") or not parts[2].isdigit():
        return None
    return parts[1], int(parts[2])


def upload_page(webapp_url: str | None) -> str | None:
    """The timeline's "Bring your history" page, when the Mini App is set up."""
    if webapp_url is None:
        return None
    joiner = "&" if "?" in webapp_url else "?"
    return f"{webapp_url}{joiner}import=1"


async def download(bot: Bot, file_id: str, data_dir: str) -> Path:
    """A Telegram file into a new staging file under DATA_DIR/imports (at most Telegram's 20 MB)."""
    file = await bot.get_file(file_id)
    path = staging_path(data_dir)
    await file.download_to_drive(path)
    return path


async def on_export(update: Update, context: HandlerContext) -> bool:
    """A document that may be an export: previewed with Import / Cancel buttons; False when it is no
    export (the document path answers it)."""
    message = update.effective_message
    document = message.document if message is not None else None
    if message is None or document is None or message.chat.type != ChatType.PRIVATE:
        return False
    if not is_export_name(document.file_name):
        return False
    runtime = context.services.runtime
    settings = runtime.settings
    if document.file_size is not None and document.file_size > DOWNLOAD_LIMIT:
        if await sender(update, context) is None:
            return True
        page = upload_page(settings.webapp_url)
        if page is None:
            await send_text(context.bot, message.chat_id, TOO_BIG_NO_PAGE)
        else:
            button = InlineKeyboardButton(UPLOAD_BUTTON, web_app=WebAppInfo(url=page))
            await message.reply_text(TOO_BIG, reply_markup=InlineKeyboardMarkup([[button]]))
        return True
    try:
        path = await download(context.bot, document.file_id, settings.data_dir)
    except BadRequest as exc:
        logger.warning("export not downloaded", extra={"error": exc.message})
        return False
    if not await asyncio.to_thread(looks_like_export, path):
        remove(path)
        return False
    try:
        await _preview(update, context, runtime, path)
    finally:
        remove(path)  # kept under the run's own name when there is one
    return True


async def _preview(update: Update, context: HandlerContext, runtime: Runtime, path: Path) -> None:
    if (c := await sender(update, context)) is None:
        return
    document = c.message.document
    assert document is not None
    user, now = c.user, runtime.clock.now()
    try:
        preview = await preview_import(
            runtime.sessions, user.id, path, timezone=user.timezone, settings=runtime.settings
        )
    except ImportFileError as exc:
        await send_text(context.bot, c.message.chat_id, str(exc))
        return
    if nothing_new(preview):
        await send_text(context.bot, c.message.chat_id, NOTHING_NEW)
        return
    import_id = await begin_import(
        runtime.sessions,
        user.id,
        path,
        preview,
        file_name=PurePosixPath(document.file_name or "export").name[:200],
        file_ref=f"telegram:{document.file_id}",
        chat_id=c.message.chat_id,
        now=now,
    )
    await asyncio.to_thread(keep, path, runtime.settings.data_dir, import_id)
    await c.message.reply_text(found_text(preview, user.timezone), reply_markup=import_buttons(import_id))
    logger.info("export previewed", extra={"user_id": user.id, "import_id": import_id})


async def on_import_button(update: Update, context: HandlerContext) -> None:
    """Import or Cancel under a preview: acts only on the presser's own run, in their own chat."""
    query = update.callback_query
    if query is None:
        return
    press = parse_press(query.data)
    chat = query.message.chat if query.message is not None else None
    if press is None or chat is None or chat.type != ChatType.PRIVATE or chat.id != query.from_user.id:
        await query.answer(NOT_YOURS, show_alert=True)
        return
    action, import_id = press
    runtime = context.services.runtime
    async with runtime.sessions() as session:
        user = await UserRepository(session).by_telegram_id(query.from_user.id)
        run = await ImportRunRepository(session).owned(user.id, import_id) if user is not None else None
    if user is None or run is None:
        await query.answer(NOT_YOURS if user is None else GONE, show_alert=True)
        return
    imports, data_dir = runtime.imports, runtime.settings.data_dir
    if action == "no":
        if run.status == "previewed" and await cancel_import(runtime.sessions, user.id, import_id):
            remove(file_of(data_dir, import_id))
            await query.answer()
            await drop_buttons(query)
            await send_text(context.bot, chat.id, CANCELLED)
        else:
            await query.answer(ALREADY, show_alert=True)
        return
    if run.status != "previewed" or imports.running(import_id):
        await query.answer(ALREADY, show_alert=True)
        await drop_buttons(query)
        return
    # Kept here, or (another instance read it, or the data folder was emptied) Telegram's copy.
    path = await _file_again(runtime, context.bot, run)
    if path is None:
        await query.answer(LOST_FILE, show_alert=True)
        return
    await query.answer(STARTED)
    await drop_buttons(query)
    # The message the run edits with its progress (kept on the run, so a resumed run edits it too).
    start = ImportProgress(0, run.conversations_total, 0, run.messages_total)
    shown = await context.bot.send_message(chat.id, progress_text(start, run.source))
    async with runtime.sessions() as session, session.begin():
        await ImportRunRepository(session).set_progress_message(import_id, chat.id, shown.message_id)
    if imports.start(runtime.sessions, runtime.clock, runtime.settings, import_id, path):
        logger.info("import started", extra={"user_id": user.id, "import_id": import_id})


class TelegramImportNotes:
    """The chat hears how a run goes: one message edited with its progress, then what was stored."""

    def __init__(self, bot: Bot, runtime: Runtime) -> None:
        self.bot = bot
        self.runtime = runtime

    async def _run(self, import_id: int) -> ImportRun | None:
        async with self.runtime.sessions() as session:
            return await session.get(ImportRun, import_id)

    async def progress(self, import_id: int, progress: ImportProgress) -> None:
        """Edit the run's progress message (sent first, when the run has none yet)."""
        run = await self._run(import_id)
        if run is None or run.chat_id is None:
            return
        text = progress_text(progress, run.source)
        if run.progress_message_id is not None:
            try:
                await self.bot.edit_message_text(
                    text, chat_id=run.chat_id, message_id=run.progress_message_id
                )
                return
            except BadRequest as exc:
                if "not modified" in exc.message:
                    return
                logger.info("progress message not edited; sending a new one", extra={"error": exc.message})
        sent = await self.bot.send_message(run.chat_id, text)
        async with self.runtime.sessions() as session, session.begin():
            await ImportRunRepository(session).set_progress_message(import_id, run.chat_id, sent.message_id)

    async def finished(self, import_id: int, result: ImportResult | None, error: str | None) -> None:
        """Say what was stored (or why it stopped) in the run's chat."""
        run = await self._run(import_id)
        if run is None or run.chat_id is None:
            return
        if result is not None:
            timezone = await _timezone(self.runtime, run.user_id)
            done = ImportProgress(
                result.conversations, result.conversations, result.messages, result.messages
            )
            await self.progress(import_id, done)
            await send_text(self.bot, run.chat_id, stored_text(result, run.source, timezone))
        elif error is not None:
            await send_text(self.bot, run.chat_id, error)


async def _timezone(runtime: Runtime, user_id: int) -> str:
    async with runtime.sessions() as session:
        user = await session.get(User, user_id)
    return user.timezone if user is not None else runtime.settings.default_timezone


async def resume_imports(runtime: Runtime, bot: Bot) -> None:
    """From the start on, every half lease: the runs a stop or crash interrupted (anywhere: the web
    process too) carry on here once their lease has lapsed, from the kept file or downloaded again."""
    dropped = await asyncio.to_thread(drop_staged, runtime.settings.data_dir)
    if dropped:
        logger.info("half-received exports deleted", extra={"files": dropped})
    lease = timedelta(seconds=runtime.settings.import_lease_seconds)
    fileless: set[int] = set()
    while True:
        async with runtime.sessions() as session:
            runs = await ImportRunRepository(session).interrupted()
        for run in runs:
            lapsed = run.claimed_at is None or ensure_utc(run.claimed_at) + lease <= runtime.clock.now()
            imports = runtime.imports
            if not lapsed or imports.running(run.id) or run.id in fileless | imports.broken:
                continue  # stored now by some process, or nothing to store it from
            path = await _file_again(runtime, bot, run)
            if path is None:
                fileless.add(run.id)
                logger.warning("interrupted import has no file left", extra={"import_id": run.id})
                continue
            runtime.imports.start(runtime.sessions, runtime.clock, runtime.settings, run.id, path)
            logger.info("interrupted import resumed", extra={"import_id": run.id})
        await asyncio.sleep(max(RESUME_EVERY_SECONDS, lease.total_seconds() / 2))


async def _file_again(runtime: Runtime, bot: Bot, run: ImportRun) -> Path | None:
    """The run's file: kept under DATA_DIR/imports, at its local path, or downloaded from Telegram."""
    data_dir, ref = runtime.settings.data_dir, run.file_ref or ""
    if (path := file_of(data_dir, run.id)) is not None:
        return path
    if ref.startswith("telegram:"):
        try:
            staged = await download(bot, ref.removeprefix("telegram:"), data_dir)
        except TelegramError as exc:
            logger.warning(
                "interrupted import not downloaded", extra={"import_id": run.id, "error": str(exc)}
            )
            return None
        return await asyncio.to_thread(keep, staged, data_dir, run.id)
    return await asyncio.to_thread(existing_file, ref)
