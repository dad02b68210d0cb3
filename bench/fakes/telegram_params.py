"""How the fake Bot API reads a request: form-encoded, multipart or JSON, with PTB's value encoding."""

from __future__ import annotations

import email.policy
import json
from email import message_from_bytes
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request

Json = dict[str, Any]
# PTB sends str params raw and everything else JSON-encoded; these are strings even when they look like JSON.
_STRING_PARAMS = frozenset(
    {
        "text",
        "file_id",
        "caption",
        "parse_mode",
        "url",
        "secret_token",
        "callback_query_id",
        "inline_message_id",
        "action",
        "language_code",
        "ip_address",
        "business_connection_id",
        "message_effect_id",
        "query",
    }
)


def _decode(name: str, value: str) -> Any:
    if name in _STRING_PARAMS:
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


async def read_params(request: Request) -> tuple[Json, dict[str, tuple[str, bytes, str]]]:
    """Form-encoded or multipart body (PTB sends both) -> decoded params and uploaded files."""
    body, ctype = await request.body(), request.headers.get("content-type", "")
    raw: dict[str, str] = dict(request.query_params)
    files: dict[str, tuple[str, bytes, str]] = {}
    if ctype.startswith("multipart/form-data"):
        # The stdlib email parser reads multipart/form-data losslessly; no python-multipart needed.
        head = b"Content-Type: " + ctype.encode() + b"\r\n\r\n"
        msg = message_from_bytes(head + body, policy=email.policy.HTTP)
        assert isinstance(msg, EmailMessage)
        for part in msg.iter_parts():
            name = str(part.get_param("name", header="content-disposition"))
            payload = part.get_payload(decode=True)
            assert isinstance(payload, bytes)
            if (filename := part.get_filename()) is not None:
                files[name] = (filename, payload, part.get_content_type())
            else:
                raw[name] = payload.decode()
    elif ctype.startswith("application/json") and body:
        return {**raw, **json.loads(body)}, files
    else:
        raw.update(parse_qsl(body.decode(), keep_blank_values=True))
    return {name: _decode(name, value) for name, value in raw.items()}, files
