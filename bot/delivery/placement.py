"""Where an answer goes in its chat: in a group, as a reply to the message it answers, in its topic.

A private chat is one conversation, so its answers are plain messages. A group has many people and
maybe topics (forums): the answer replies to the addressed message, so everyone sees whom it
answers, and goes into that message's topic. Read from the update's JSON, so an answer resumed
after a restart goes to the same place.
"""

from __future__ import annotations

from typing import Any

from telegram import ReplyParameters

GROUP_CHATS = frozenset({"group", "supergroup"})


def placement(payload: dict[str, Any] | None) -> dict[str, Any]:
    """The send parameters that place an answer to this update's message (none in a private chat)."""
    message = (payload or {}).get("message")
    if not isinstance(message, dict):
        return {}
    chat = message.get("chat")
    message_id = message.get("message_id")
    if not isinstance(chat, dict) or chat.get("type") not in GROUP_CHATS or not isinstance(message_id, int):
        return {}
    # The addressed message may be deleted before the answer is sent: the answer goes out anyway.
    where: dict[str, Any] = {
        "reply_parameters": ReplyParameters(message_id=message_id, allow_sending_without_reply=True)
    }
    thread = message.get("message_thread_id")
    if message.get("is_topic_message") and isinstance(thread, int):
        where["message_thread_id"] = thread
    return where
