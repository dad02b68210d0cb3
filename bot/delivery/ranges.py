"""Telegram's ranges and types, checked on an update's JSON before it reaches the database or PTB.

An update whose numbers Telegram could never have sent can never be worked either: an id past 64
bits does not fit a BIGINT column, a date past the year 9999 makes `Update.de_json` overflow, and
`de_json` does not check types (a list where the text belongs reaches the turn). Such an update is
stored dead with the reason this module gives, and acknowledged, so Telegram does not deliver it
again and again. The bounds are Telegram's own, all inside a signed 64-bit integer:

- `update_id`: positive, below 2**63 (the inbox's unique BIGINT key);
- user and chat ids (`id` of a user or chat object, `*user_id`, `*chat_id`): at most 52
  significant bits, which Telegram promises so that a double holds them; checked against 2**53;
- message ids (`*message_id`, `message_thread_id`): Telegram's 32-bit message numbers;
- dates (`date`, `*_date`): Unix time in Telegram's 32-bit field;
- every other integer: signed 64-bit;
- the fields the handlers read have Telegram's types: strings (`text`, `caption`, names, `type`),
  objects (the message, its sender and chat), and a boolean `is_bot`.
"""

from __future__ import annotations

from typing import Any

INT64 = 2**63
ID_LIMIT = 2**53
INT32 = 2**31

# Objects whose integer `id` is a user's or a chat's (elsewhere, as in a callback query, ids are strings).
_USERS_AND_CHATS = frozenset(
    {"from", "chat", "user", "sender_chat", "forward_from", "forward_from_chat", "via_bot",
     "new_chat_member", "old_chat_member", "left_chat_member", "new_chat_members", "sender_business_bot"}
)  # fmt: skip
_STRINGS = frozenset(
    {"text", "caption", "first_name", "last_name", "username", "language_code", "title", "type"}
)
_OBJECTS = frozenset(
    {"message", "edited_message", "channel_post", "edited_channel_post", "business_message",
     "callback_query", "from", "chat", "reply_to_message", "sender_chat"}
)  # fmt: skip
_TYPES: dict[str, tuple[type, str]] = {
    **dict.fromkeys(_STRINGS, (str, "a string")),
    **dict.fromkeys(_OBJECTS, (dict, "an object")),
    "is_bot": (bool, "a boolean"),
}


def _bounds(key: str, parent: str) -> tuple[int, int, str] | None:
    """(lowest, past the highest, what it is) for an integer under `key`, or None for any int64."""
    if key == "update_id":
        return 0, INT64, "an update id"
    if key.endswith("message_id") or key == "message_thread_id":
        return 0, INT32, "a message id"
    if (key == "id" and parent in _USERS_AND_CHATS) or key.endswith(("user_id", "chat_id")):
        return -ID_LIMIT + 1, ID_LIMIT, "a user or chat id"
    if key == "date" or key.endswith("_date"):
        return 0, INT32, "a date"
    return None


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, int | float | bool) or value is None else type(value).__name__
    return text if len(text) <= 24 else f"{text[:20]}..."


def _check(key: str, parent: str, value: Any, path: str) -> str | None:
    if (expected := _TYPES.get(key)) is not None and not isinstance(value, expected[0]):
        return f"{path} is {_shown(value)}, not {expected[1]}"
    bounds = _bounds(key, parent)
    if bounds is not None and (not isinstance(value, int) or isinstance(value, bool)):
        return f"{path} is {_shown(value)}, not {bounds[2]}"
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    low, high, what = bounds if bounds is not None else (-INT64, INT64, "a 64-bit integer")
    if low <= value < high:
        return None
    return f"{path} is {_shown(value)}, out of range for {what}"


def out_of_range(payload: dict[str, Any]) -> str | None:
    """Why this update cannot be Telegram's (the first reason found), or None when it fits."""
    stack: list[tuple[str, str, Any, str]] = [(str(k), "", v, str(k)) for k, v in payload.items()]
    while stack:
        key, parent, value, path = stack.pop()
        if (reason := _check(key, parent, value, path)) is not None:
            return reason
        if isinstance(value, dict):
            stack.extend((str(k), key, v, f"{path}.{k}") for k, v in value.items())
        elif isinstance(value, list):
            stack.extend((key, parent, v, f"{path}[{i}]") for i, v in enumerate(value))
    return None
