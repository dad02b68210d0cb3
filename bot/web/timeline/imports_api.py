"""The timeline's "Bring your history": an export too big for Telegram's 20 MB download limit, uploaded
from the page, previewed, and imported in the background like one sent in the chat.

`POST /timeline/api/imports` takes the file as the request's body (the page sends the `File` itself,
not a form), streamed to DATA_DIR/imports chunk by chunk and never held whole: a body over
IMPORT_MAX_BYTES is refused with 413 (at once when its Content-Length says so), a form with 415, an
empty one or a file that is no export with 400 and the reason, and nothing is stored. It answers the
preview and the run's id; `POST .../{id}/start` stores it (bot/importing.py's `ImportRunner`, the
same task the chat's Import button starts), `POST .../{id}/cancel` drops it, `GET .../{id}` is its
progress. Every call signs in like the rest of the timeline's API; another person's run answers 404,
like a missing one. An upload counts against the person's message limits (429 past them).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from starlette.requests import ClientDisconnect, Request

from agent.account.imports import (
    SOURCES,
    ImportFileError,
    ImportPreview,
    begin_import,
    cancel_import,
    preview_import,
)
from bot.errors import ApiError
from bot.importing import file_of, found_text, keep, looks_like_export, remove, staging_path
from bot.runtime import Runtime
from bot.web.timeline.api import SignedIn, TimelineApi, path_id
from db.models import ImportRun
from db.repositories.import_runs import ImportRunRepository

logger = logging.getLogger(__name__)

NO_USER = "Write to me in Telegram first; then you can bring your history here."
NO_EXPORT = "That file is not a ChatGPT or Claude export (a .zip with conversations.json, or that JSON file)."
EMPTY = "The upload was empty: choose the export's file and send it again."
FORM = "Send the file itself as the request's body, not as a form."
NOT_PREVIEWED = "That import is already running, done or cancelled."
LOST_FILE = "The uploaded file is gone: upload it again."
UNWRITABLE = "I can't keep that file right now; try again later."


def _too_big(cap: int) -> ApiError:
    size = f"{cap / 1e9:.3g} GB" if cap >= 1e9 else f"{cap / 1e6:.3g} MB"
    return ApiError(413, f"That file is bigger than the {size} I take.")


def _iso(value: Any) -> Any:
    return value.isoformat() if value is not None else None


def preview_payload(preview: ImportPreview, import_id: int, timezone: str) -> dict[str, Any]:
    """A preview as the page reads it: the numbers, and the words the chat would send."""
    return {
        "import_id": import_id,
        "source": preview.source,
        "assistant": SOURCES.get(preview.source, preview.source),
        "conversations": preview.conversations,
        "messages": preview.messages,
        "days": preview.days,
        "first_at": _iso(preview.first_at),
        "last_at": _iso(preview.last_at),
        "model_calls": preview.model_calls,
        "input_tokens": preview.input_tokens,
        "dollars": preview.dollars,
        "text": found_text(preview, timezone),
    }


def run_payload(run: ImportRun) -> dict[str, Any]:
    """A run's state and progress."""
    return {
        "import_id": run.id,
        "status": run.status,
        "conversations_total": run.conversations_total,
        "conversations_stored": run.conversations_stored,
        "messages_total": run.messages_total,
        "messages_stored": run.messages_stored,
        "error": run.error,
    }


class ImportsApi:
    """The handlers of /timeline/api/imports; built once per web app, beside `TimelineApi`."""

    def __init__(self, runtime: Runtime, timeline: TimelineApi) -> None:
        self.runtime = runtime
        # Its rate limits: an upload counts as a message (reading a file is work, like a turn).
        self.timeline = timeline

    async def _receive(self, request: Request) -> Path:
        """The body, streamed into a staging file; 413 past the cap (the part written is removed)."""
        cap = self.runtime.settings.import_max_bytes
        if request.headers.get("content-type", "").startswith(("multipart/", "application/x-www-form")):
            raise ApiError(415, FORM)
        declared = request.headers.get("content-length", "")
        if declared.isascii() and declared.isdigit() and int(declared) > cap:
            raise _too_big(cap)
        path: Path | None = None
        size = 0
        try:
            path = staging_path(self.runtime.settings.data_dir)
            with path.open("wb") as file:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size > cap:
                        raise _too_big(cap)
                    await asyncio.to_thread(file.write, chunk)
        except ClientDisconnect as exc:
            remove(path)
            raise ApiError(400, "the upload stopped before the end; send it again") from exc
        except OSError as exc:  # the data folder full or not writable: the person can try later
            remove(path)
            logger.error("upload not written", extra={"error": repr(exc)})
            raise ApiError(503, UNWRITABLE) from exc
        except BaseException:
            remove(path)
            raise
        if size == 0:
            remove(path)
            raise ApiError(400, EMPTY)
        assert path is not None
        return path

    async def upload(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/imports: the export as the body; its preview, nothing stored yet."""
        user = who.user
        if user is None:
            raise ApiError(403, NO_USER)
        await self.timeline.limited(who, "message")
        path = await self._receive(request)
        try:
            if not await asyncio.to_thread(looks_like_export, path):
                raise ApiError(400, NO_EXPORT)
            runtime = self.runtime
            try:
                preview = await preview_import(
                    runtime.sessions, user.id, path, timezone=user.timezone, settings=runtime.settings
                )
            except ImportFileError as exc:
                raise ApiError(400, str(exc)) from exc
            name = unquote(request.headers.get("x-file-name", "")).strip()[:200] or "export"
            import_id = await begin_import(
                runtime.sessions,
                user.id,
                path,
                preview,
                file_name=name,
                file_ref=str(path),
                chat_id=who.telegram_id,
                now=runtime.clock.now(),
            )
            kept = await asyncio.to_thread(keep, path, runtime.settings.data_dir, import_id)
            async with runtime.sessions() as session, session.begin():
                await ImportRunRepository(session).set_file_ref(import_id, str(kept))
        finally:
            remove(path)
        logger.info("export uploaded and previewed", extra={"user_id": user.id, "import_id": import_id})
        return preview_payload(preview, import_id, user.timezone)

    async def _owned(self, request: Request, who: SignedIn) -> ImportRun:
        import_id = path_id(request.path_params["import_id"])
        run = None
        if who.user is not None:
            async with self.runtime.sessions() as session:
                run = await ImportRunRepository(session).owned(who.user.id, import_id)
        if run is None:
            raise ApiError(404, "not found")
        return run

    async def status(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """GET /timeline/api/imports/{id}: how far the run is."""
        return run_payload(await self._owned(request, who))

    async def start(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/imports/{id}/start: store the previewed run in the background."""
        run = await self._owned(request, who)
        runtime = self.runtime
        if run.status != "previewed" and not runtime.imports.running(run.id):
            raise ApiError(409, NOT_PREVIEWED)
        path = file_of(runtime.settings.data_dir, run.id)
        if path is None:
            raise ApiError(410, LOST_FILE)
        if runtime.imports.start(runtime.sessions, runtime.clock, runtime.settings, run.id, path):
            logger.info("import started from the timeline", extra={"import_id": run.id})
        return {**run_payload(run), "status": "running"}

    async def cancel(self, request: Request, who: SignedIn) -> dict[str, Any]:
        """POST /timeline/api/imports/{id}/cancel: drop a previewed run; nothing is stored."""
        run = await self._owned(request, who)
        assert who.user is not None
        if run.status != "previewed" or not await cancel_import(self.runtime.sessions, who.user.id, run.id):
            raise ApiError(409, NOT_PREVIEWED)
        remove(file_of(self.runtime.settings.data_dir, run.id))
        return {**run_payload(run), "status": "cancelled"}
