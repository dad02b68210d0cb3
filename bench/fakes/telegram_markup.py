"""Telegram's parse modes (HTML, MarkdownV2), checked as strictly as the real Bot API checks them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_HTML_TAGS = frozenset(
    {
        "b",
        "strong",
        "i",
        "em",
        "u",
        "ins",
        "s",
        "strike",
        "del",
        "span",
        "tg-spoiler",
        "a",
        "tg-emoji",
        "code",
        "pre",
        "blockquote",
        "tg-time",
    }
)
_HTML_ENTITY = re.compile(r"&(#x[0-9a-fA-F]+|#[0-9]+|lt|gt|amp|quot);")
_MD_MARKERS = {"__": "Underline", "||": "Spoiler", "*": "Bold", "_": "Italic", "~": "Strikethrough"}
_MD_RESERVED = frozenset("_*[]()~`>#+-=|{}.!")


@dataclass
class ApiError(Exception):
    """An error answer of the Bot API: HTTP status, description and optional parameters."""

    code: int
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)


def bad_request(description: str) -> ApiError:
    """A 400 error with Telegram's "Bad Request: " prefix."""
    return ApiError(400, f"Bad Request: {description}")


def _unparsable(detail: str) -> ApiError:
    return bad_request(f"can't parse entities: {detail}")


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode())


def plain_from_html(text: str, *, extra_tags: frozenset[str] = frozenset()) -> str:
    """Parse Telegram HTML strictly enough to reject what Telegram rejects; return the visible text.
    `extra_tags`: tags a rich message allows beyond a message's (a draft's `tg-thinking`)."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "&" and (entity := _HTML_ENTITY.match(text, i)):
            name = entity.group(1)
            num = name[2:] if name.startswith("#x") else name[1:] if name.startswith("#") else None
            out.append(
                chr(int(num, 16 if name.startswith("#x") else 10))
                if num
                else {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}[name]
            )
            i = entity.end()
            continue
        if text[i] != "<":
            out.append(text[i])
            i += 1
            continue
        end, offset = text.find(">", i), _byte_offset(text, i)
        if end == -1:
            raise _unparsable(f"Unclosed start tag at byte offset {offset}")
        tag = text[i + 1 : end]
        if tag.startswith("/"):
            name = tag[1:].strip().lower()
            if not stack:
                raise _unparsable(f"Unexpected end tag at byte offset {offset}")
            if name != stack[-1]:
                raise _unparsable(
                    f'Unmatched end tag at byte offset {offset}, expected "</{stack[-1]}>", found "</{name}>"'
                )
            stack.pop()
        else:
            name = re.match(r"[a-zA-Z0-9-]*", tag).group().lower()  # type: ignore[union-attr]
            if name not in _HTML_TAGS and name not in extra_tags:
                raise _unparsable(f'Unsupported start tag "{name}" at byte offset {offset}')
            stack.append(name)
        i = end + 1
    if stack:
        raise _unparsable(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def plain_from_markdown_v2(text: str) -> str:
    """Parse Telegram MarkdownV2 (reserved characters, unclosed entities); return the visible text."""
    out: list[str] = []
    stack: list[tuple[str, int]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and i + 1 < len(text):
            out.append(text[i + 1])
            i += 2
            continue
        if ch == "`":
            fence = "```" if text.startswith("```", i) else "`"
            end = text.find(fence, i + len(fence))
            if end == -1:
                kind = "Pre" if fence == "```" else "Code"
                raise _unparsable(f"Can't find end of {kind} entity at byte offset {_byte_offset(text, i)}")
            out.append(text[i + len(fence) : end])
            i = end + len(fence)
            continue
        marker = next((m for m in _MD_MARKERS if text.startswith(m, i)), None)
        if marker is None and ch == "[":
            marker = "["
        if marker is not None:
            if stack and stack[-1][0] == marker:
                stack.pop()
            else:
                stack.append((marker, _byte_offset(text, i)))
            i += len(marker)
            continue
        if ch == "]" and stack and stack[-1][0] == "[":
            stack.pop()
            close = text.find(")", i) if text.startswith("(", i + 1) else -1
            i = close + 1 if close != -1 else i + 1
            continue
        if ch == ">" and (i == 0 or text[i - 1] == "\n"):  # a blockquote line
            i += 1
            continue
        if ch in _MD_RESERVED:
            raise _unparsable(f"Character '{ch}' is reserved and must be escaped with the preceding '\\'")
        out.append(ch)
        i += 1
    if stack:
        marker, offset = stack[-1]
        kind = _MD_MARKERS.get(marker, "TextUrl")
        raise _unparsable(f"Can't find end of {kind} entity at byte offset {offset}")
    return "".join(out)


def visible_text(text: str, parse_mode: str | None) -> str:
    """The text a user would see once `parse_mode` markup is parsed (raises ApiError like Telegram)."""
    mode = (parse_mode or "").lower()
    if mode == "html":
        return plain_from_html(text)
    return plain_from_markdown_v2(text) if mode == "markdownv2" else text


_ENTITY_TYPES = frozenset(
    {
        "mention",
        "hashtag",
        "cashtag",
        "bot_command",
        "url",
        "email",
        "phone_number",
        "bold",
        "italic",
        "underline",
        "strikethrough",
        "spoiler",
        "blockquote",
        "expandable_blockquote",
        "code",
        "pre",
        "text_link",
        "text_mention",
        "custom_emoji",
        "date_time",
    }
)


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit of Telegram's entity offsets."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def check_entities(text: str, entities: Any) -> None:
    """Reject `entities` as Telegram does: known types, offsets and lengths in UTF-16 inside the text."""
    if entities is None:
        return
    if not isinstance(entities, list):
        raise bad_request("can't parse entities JSON object")
    size = utf16_len(text)
    for entity in entities:
        kind, offset, length = entity.get("type"), entity.get("offset"), entity.get("length")
        if kind not in _ENTITY_TYPES:
            raise bad_request(f"unsupported entity type {kind!r}")
        if not isinstance(offset, int) or not isinstance(length, int) or offset < 0 or length <= 0:
            raise bad_request(f"can't parse entities: wrong offset or length of {kind} entity")
        if offset + length > size:
            raise bad_request(f"entity {kind} at {offset}+{length} is outside the text ({size} UTF-16 units)")
        url = str(entity.get("url", ""))
        if kind == "text_link" and not url.startswith(("http://", "https://", "tg://")):
            raise bad_request("can't parse entities: wrong HTTP URL")
        if kind == "pre" and not isinstance(entity.get("language", ""), str):
            raise bad_request("can't parse entities: wrong pre language")


MAX_TEXT_LENGTH = 4096


def checked_text(p: dict[str, Any], *, may_be_empty: bool = False) -> str:
    """The visible text of a sendMessage/editMessageText/sendMessageDraft call, rejected as Telegram
    rejects it."""
    visible = visible_text(str(p.get("text", "")), p.get("parse_mode"))
    if not visible.strip() and not may_be_empty:
        raise bad_request("message text is empty")
    if utf16_len(visible) > MAX_TEXT_LENGTH:
        raise bad_request("message is too long")
    check_entities(visible, p.get("entities"))
    return visible


# Telegram's limit on an inline button's callback_data, in bytes.
MAX_CALLBACK_DATA_BYTES = 64


def check_callback_data(reply_markup: object) -> None:
    """Refuse an inline keyboard with a button whose callback_data is empty or past 64 bytes, as
    Telegram does."""
    if not isinstance(reply_markup, dict):
        return
    for row in reply_markup.get("inline_keyboard", []):
        for button in row:
            data = button.get("callback_data")
            if data is not None and not 1 <= len(str(data).encode()) <= MAX_CALLBACK_DATA_BYTES:
                raise bad_request("BUTTON_DATA_INVALID")
