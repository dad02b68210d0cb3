"""The voice calls' HTTP surface: /voice/initiate, /voice/server-tool, /voice/call-ended.

Routes of the web app (webhook mode, or `python -m bot web`), present when VOICE_TOKEN_SECRET is set.
Every answer is JSON; errors are `{"ok": false, "error": {"code", "message"}}` with 401 (secret,
token or signature), 400 (what the caller can fix), 404 (unknown user), 413 (body too large) or
503 (storage unavailable): a voice agent never sees a 500 for a tool error. The post-call webhook's
signature header is checked for presence, shape and time before its body is read, and the body is
read only up to MAX_WEBHOOK_BYTES.
"""

from __future__ import annotations

import hmac
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from agent.core.errors import ConfigurationError, VoiceAuthError, VoiceRequestError, VoiceUserNotFoundError
from agent.voice.service import build_voice_service
from bot.errors import ApiError, IdFormatError, JsonInputError
from bot.runtime import Runtime
from bot.web import json_input
from bot.web.ids import parse_id

logger = logging.getLogger(__name__)

SIGNATURE_HEADER = "ElevenLabs-Signature"
TOKEN_HEADER = "X-Voice-Token"
MAX_REQUEST_BYTES = 256 * 1024
# A post-call webhook: a call's record (its transcript, tool calls, per-turn metadata and analysis).
# An hour-long call, the call token's default life, is some hundreds of turns: about 1 MB of JSON.
MAX_WEBHOOK_BYTES = 4 * 1024 * 1024
# Conversations post-processed right after a call is stored (oldest due first, the call among them).
POSTPROCESS_AT_ONCE = 3

Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"ok": False, "error": {"code": code, "message": message}}, status_code=status)


def _guarded(handler: Handler) -> Handler:
    """Map the voice errors to their structured answers."""

    async def wrapped(request: Request) -> Response:
        try:
            return await handler(request)
        except VoiceAuthError as exc:
            logger.info("voice request refused", extra={"path": request.url.path, "reason": str(exc)})
            return _error(401, "unauthorized", str(exc))
        except VoiceRequestError as exc:
            return _error(400, exc.code, exc.message)
        except VoiceUserNotFoundError as exc:
            return _error(404, "unknown_user", str(exc))
        except ApiError as exc:  # only the body's limit raises it here
            return _error(exc.status, "too_large", exc.message)
        except (SQLAlchemyError, OSError) as exc:
            logger.error("voice storage unavailable", extra={"path": request.url.path, "error": repr(exc)})
            return _error(503, "unavailable", "memory is unavailable right now; try again shortly")

    return wrapped


async def _body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > limit:
        raise ApiError(413, "the request body is too large")  # said up front: nothing is read
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(413, "the request body is too large")
        chunks.append(chunk)
    return b"".join(chunks)


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await _body(request, MAX_REQUEST_BYTES)
    if not raw.strip():
        return {}
    try:
        value = json_input.loads(raw)
    except JsonInputError as exc:
        raise VoiceRequestError("bad_request", f"the body is not usable JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise VoiceRequestError("bad_request", "the body must be a JSON object")
    return value


def _optional_id(body: dict[str, Any], key: str) -> int | None:
    """An id of the body: 400 unless ASCII digits, 404 outside what a stored id can be (64 bits)."""
    value = body.get(key)
    if value is None:
        return None
    try:
        number = parse_id(value, signed=True)
    except IdFormatError as exc:
        raise VoiceRequestError("bad_request", f"{key} must be an integer in digits 0-9") from exc
    # Database ids start at 1; Telegram ids may be anything within signed 64 bits.
    if number is None or (key == "user_id" and number < 1):
        raise VoiceUserNotFoundError("no such user")
    return number


def _call_token(request: Request) -> str | None:
    # ElevenLabs puts a dynamic variable in a header as its bare value; others send a bearer token.
    given = request.headers.get(TOKEN_HEADER) or request.headers.get("Authorization", "")
    return given.removeprefix("Bearer ").strip() or None


def routes(runtime: Runtime) -> list[BaseRoute]:
    """The voice routes, or none when voice calls are not configured."""
    settings = runtime.settings
    if settings.voice_token_secret is None:
        return []
    if runtime.recall is None or runtime.facts is None:
        raise ConfigurationError("voice calls need the recall services of the runtime")
    service = build_voice_service(
        settings,
        sessions=runtime.sessions,
        clock=runtime.clock,
        turns=runtime.turns,
        recall=runtime.recall,
        facts=runtime.facts,
    )
    assert settings.voice_initiate_secret is not None  # build_voice_service required it
    initiate_secret = settings.voice_initiate_secret.get_secret_value().encode()

    async def postprocess() -> None:
        from jobs.registry import run_job

        try:
            await run_job("postprocess", runtime.jobs, limit=POSTPROCESS_AT_ONCE)
        except (SQLAlchemyError, OSError) as exc:
            # The call is stored and queued: the scheduled job processes it instead.
            logger.warning("voice post-processing deferred", extra={"error": repr(exc)})

    @_guarded
    async def initiate(request: Request) -> Response:
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip().encode()
        if not given or not hmac.compare_digest(given, initiate_secret):
            raise VoiceAuthError("missing or wrong initiate secret")
        body = await _json_object(request)
        answer = await service.initiate(
            user_id=_optional_id(body, "user_id"), telegram_id=_optional_id(body, "telegram_id")
        )
        return JSONResponse({"ok": True, **answer})

    @_guarded
    async def server_tool(request: Request) -> Response:
        token = service.authenticate(_call_token(request))
        body = await _json_object(request)
        name = request.path_params.get("tool") or body.pop("tool", None)
        if not isinstance(name, str) or not name:
            raise VoiceRequestError("unknown_tool", f"name the tool: one of {', '.join(service.tools.names)}")
        result = await service.run_tool(token, name, body)
        return JSONResponse({"ok": True, "tool": name, "result": result})

    @_guarded
    async def call_ended(request: Request) -> Response:
        signature = request.headers.get(SIGNATURE_HEADER)
        # Presence, shape and time first: an unsigned request is refused without reading its body.
        service.check_signature(signature)
        body = await _body(request, MAX_WEBHOOK_BYTES)
        ended = await service.call_ended(body, signature, parse=json_input.loads)
        if ended.stored is None:
            # Authentic but unusable: acknowledged, or ElevenLabs would retry and disable the webhook.
            return JSONResponse({"ok": True, "stored": False, "reason": ended.reason})
        stored = ended.stored
        fresh = not stored.duplicate and runtime.settings.voice_postprocess_at_once
        return JSONResponse(
            {
                "ok": True,
                "stored": True,
                "duplicate": stored.duplicate,
                "conversation_id": stored.conversation_id,
                "messages": stored.messages,
            },
            # After the answer is sent; uvicorn's graceful shutdown waits for it.
            background=BackgroundTask(postprocess) if fresh else None,
        )

    return [
        Route("/voice/initiate", initiate, methods=["POST"]),
        Route("/voice/server-tool", server_tool, methods=["POST"]),
        Route("/voice/server-tool/{tool}", server_tool, methods=["POST"]),
        Route("/voice/call-ended", call_ended, methods=["POST"]),
    ]
