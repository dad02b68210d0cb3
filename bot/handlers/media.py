"""Photos, text documents, PDFs and voice notes: downloaded in the turn, then answered like text.

The inbox stores the update; the file is fetched (getFile + download) only when the update is
worked, capped in size before and after the download. A photo or document reaches the model as an
attachment (agent/chat/attachments.py); a voice note is transcribed when a transcription endpoint is
configured. Anything too large, of another type, or not transcribable gets a short honest answer,
stored like the other media (bot/handlers/messages.py).
"""

from __future__ import annotations

import logging
from pathlib import PurePosixPath

from telegram import Update
from telegram.error import BadRequest

from agent.chat.attachments import Attachment
from agent.core.errors import DocumentTooHeavyError, UnreadablePdfError
from bot.errors import FileTooLargeError, TranscriptionError
from bot.handlers.context import HandlerContext
from bot.handlers.imports import on_export
from bot.handlers.messages import Fetched, answer, describe, on_other
from bot.handlers.transcribe import transcribe

logger = logging.getLogger(__name__)

TEXT_TYPES = {".txt": "text/plain", ".md": "text/markdown", ".csv": "text/csv", ".json": "application/json"}
PDF = ".pdf"
TOO_BIG = "That {what} is too big for me to look at (I take up to {limit}). Could you send a smaller one?"
UNHEARD = "I couldn't make out that voice note, sorry. Could you type it for me?"
UNREADABLE_PDF = (
    "I couldn't read any text in that PDF (it may be scanned pages, or protected by a password). "
    "Could you paste the part you mean?"
)
HEAVY_PDF = (
    "I couldn't read that PDF: opening it takes more time or memory than I can give one file. "
    "Could you paste the part you mean?"
)


async def _download(context: HandlerContext, file_id: str, size: int | None, cap: int) -> bytes:
    if size is not None and size > cap:
        raise FileTooLargeError(f"{size} bytes > {cap}")
    try:
        file = await context.bot.get_file(file_id)
    except BadRequest as exc:  # Telegram serves bots files up to 20 MB
        if "too big" in exc.message.lower():
            raise FileTooLargeError(exc.message) from exc
        raise
    if file.file_size is not None and file.file_size > cap:
        raise FileTooLargeError(f"{file.file_size} bytes > {cap}")
    data = bytes(await file.download_as_bytearray())
    if len(data) > cap:
        raise FileTooLargeError(f"{len(data)} bytes > {cap}")
    return data


def _limit(cap: int) -> str:
    return f"{cap // 1_000_000} MB" if cap >= 1_000_000 else f"{cap // 1000} KB"


async def on_photo(update: Update, context: HandlerContext) -> None:
    """A photo: the model sees it (with the caption) and answers; the transcript keeps a description."""
    message = update.effective_message
    if message is None or not message.photo:
        return
    cap = context.services.runtime.settings.photo_max_bytes
    kind, content = describe(message)
    # The largest size under the cap (Telegram sends several sizes of every photo).
    fitting = [p for p in message.photo if p.file_size is None or p.file_size <= cap] or [message.photo[0]]
    photo = max(fitting, key=lambda p: p.width * p.height)

    async def fetch() -> Fetched:
        try:
            data = await _download(context, photo.file_id, photo.file_size, cap)
        except FileTooLargeError:
            return Fetched(content, refusal=TOO_BIG.format(what="photo", limit=_limit(cap)))
        return Fetched(content, [Attachment("photo", "image/jpeg", data)])

    await answer(update, context, content, kind=kind, fetch=fetch)


async def on_document(update: Update, context: HandlerContext) -> None:
    """An assistant's export is offered for import; a text file (txt, md, csv, json) or a PDF's text is
    read like a photo is seen; other files get the short answer."""
    message = update.effective_message
    document = message.document if message is not None else None
    if message is None or document is None:
        return
    if await on_export(update, context):  # a ChatGPT or Claude export (bot/handlers/imports.py)
        return
    suffix = PurePosixPath(document.file_name or "").suffix.lower()
    if suffix not in TEXT_TYPES and suffix != PDF:
        await on_other(update, context)
        return
    runtime = context.services.runtime
    settings = runtime.settings
    cap = settings.pdf_max_bytes if suffix == PDF else settings.document_max_bytes
    kind, content = describe(message)

    async def fetch() -> Fetched:
        try:
            data = await _download(context, document.file_id, document.file_size, cap)
        except FileTooLargeError:
            return Fetched(content, refusal=TOO_BIG.format(what="file", limit=_limit(cap)))
        if suffix == PDF:
            try:
                # In a child process under a deadline and a memory ceiling (agent/chat/documents.py).
                text = await runtime.documents.pdf_text(
                    data, max_pages=settings.pdf_max_pages, max_chars=settings.document_max_bytes
                )
            except DocumentTooHeavyError as exc:
                logger.warning("PDF too heavy to parse", extra={"reason": exc.reason})
                return Fetched(content, refusal=HEAVY_PDF)
            except UnreadablePdfError as exc:
                logger.info("PDF not read", extra={"error": str(exc)})
                return Fetched(content, refusal=UNREADABLE_PDF)
            media_type = "application/pdf"
        else:
            text = data.decode("utf-8", errors="replace").replace("\x00", "")
            media_type = TEXT_TYPES[suffix]
        item = Attachment("document", media_type, text=text, name=document.file_name)
        return Fetched(content, [item])

    await answer(update, context, content, kind=kind, fetch=fetch)


async def on_voice_note(update: Update, context: HandlerContext) -> None:
    """A voice note: transcribed when an endpoint is configured, then answered as text."""
    message = update.effective_message
    settings = context.services.runtime.settings
    if message is None or message.voice is None or not settings.transcription_url:
        await on_other(update, context)
        return
    voice = message.voice
    kind, content = describe(message)

    async def fetch() -> Fetched:
        try:
            audio = await _download(context, voice.file_id, voice.file_size, settings.voice_note_max_bytes)
            mime = voice.mime_type or "audio/ogg"
            words = await transcribe(settings, audio, filename="voice.ogg", mime_type=mime)
        except (FileTooLargeError, TranscriptionError) as exc:
            logger.warning("voice note not transcribed", extra={"error": repr(exc)})
            return Fetched(content, refusal=UNHEARD)
        # What the model reads is what is stored: the transcript, marked as spoken.
        return Fetched(f"{content} {words}")

    await answer(update, context, content, kind=kind, fetch=fetch)
