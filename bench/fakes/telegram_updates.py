"""Realistic incoming Telegram updates (private messages, media, edits, channel posts) for the fake."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from telegram.constants import ReactionEmoji

Json = dict[str, Any]
# The emoji Telegram accepts as a reaction (ReactionTypeEmoji); the only ones a user can put on.
REACTION_EMOJI = frozenset(e.value for e in ReactionEmoji)


class UpdateFactory:
    """Builds updates the way Telegram shapes them and hands each to `push_update`."""

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        self._now = now
        self._ids_lock = threading.Lock()
        self._message_ids: dict[int | str, int] = {}
        self._file_ids = itertools.count(1)

    def push_update(self, update: Json) -> Json:
        """Queue one update (implemented by the server)."""
        raise NotImplementedError

    def keep_file(self, file: Json, content: bytes) -> None:
        """Serve `content` for this file through getFile (implemented by the server)."""
        raise NotImplementedError

    def _next_message_id(self, chat_id: int | str) -> int:
        with self._ids_lock:
            self._message_ids[chat_id] = self._message_ids.get(chat_id, 0) + 1
            return self._message_ids[chat_id]

    def _file(self, kind: str, **extra: Any) -> Json:
        n = next(self._file_ids)
        fields = {"file_id": f"fake-{kind}-{n}", "file_unique_id": f"fake-u{kind}-{n}", **extra}
        return {key: value for key, value in fields.items() if value is not None}

    def _user_message(
        self,
        user_id: int,
        first_name: str,
        date: int | None,
        message_id: int | None,
        kind: str = "message",
        **content: Any,
    ) -> Json:
        user = {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"}
        chat = {"id": user_id, "type": "private", "first_name": first_name}
        message = {
            "message_id": message_id or self._next_message_id(user_id),
            "from": user,
            "chat": chat,
            "date": int(self._now()) if date is None else date,
            **content,
        }
        message = {key: value for key, value in message.items() if value is not None}
        return self.push_update({kind: message})

    def user_message(
        self,
        user_id: int,
        text: str,
        *,
        first_name: str = "Alice",
        date: int | None = None,
        message_id: int | None = None,
    ) -> Json:
        """A private text message from `user_id` (chat id = user id)."""
        return self._user_message(user_id, first_name, date, message_id, text=text)

    def command(self, user_id: int, text: str, *, first_name: str = "Alice", date: int | None = None) -> Json:
        """A private message like "/start payload" whose first word carries a bot_command entity."""
        entity = {"type": "bot_command", "offset": 0, "length": len(text.split()[0])}
        return self._user_message(user_id, first_name, date, None, text=text, entities=[entity])

    def sticker(self, user_id: int, *, emoji: str = "👍", first_name: str = "Alice") -> Json:
        """A private sticker message."""
        sticker = self._file(
            "sticker", type="regular", width=512, height=512, is_animated=False, is_video=False, emoji=emoji
        )
        return self._user_message(user_id, first_name, None, None, sticker=sticker)

    def photo(
        self,
        user_id: int,
        *,
        caption: str | None = None,
        first_name: str = "Alice",
        content: bytes | None = None,
    ) -> Json:
        """A private photo message (two sizes), optionally captioned; `content` is served for download."""
        size = len(content) if content else None
        # Both sizes serve the same bytes: enough to tell which one a bot chose by its file_id.
        sizes = [self._file("photo", width=90, height=90, file_size=size)]
        sizes.append(self._file("photo", width=800, height=800, file_size=size))
        if content is not None:
            for photo in sizes:
                self.keep_file(photo, content)
        return self._user_message(user_id, first_name, None, None, photo=sizes, caption=caption)

    def voice(
        self, user_id: int, *, duration: int = 3, first_name: str = "Alice", content: bytes | None = None
    ) -> Json:
        """A private voice note; `content` is served for download when given."""
        size = len(content) if content is not None else 4096
        voice = self._file("voice", duration=duration, mime_type="audio/ogg", file_size=size)
        if content is not None:
            self.keep_file(voice, content)
        return self._user_message(user_id, first_name, None, None, voice=voice)

    def document(
        self,
        user_id: int,
        *,
        file_name: str = "notes.txt",
        caption: str | None = None,
        first_name: str = "Alice",
        content: bytes | None = None,
        mime_type: str = "text/plain",
    ) -> Json:
        """A private document message; `content` is served for download when given."""
        size = len(content) if content is not None else 42
        doc = self._file("document", file_name=file_name, mime_type=mime_type, file_size=size)
        if content is not None:
            self.keep_file(doc, content)
        return self._user_message(user_id, first_name, None, None, document=doc, caption=caption)

    def edited_message(
        self, user_id: int, text: str, *, message_id: int, first_name: str = "Alice", date: int | None = None
    ) -> Json:
        """An `edited_message` update for an earlier private message."""
        edit_date = int(self._now())
        sent_at = date if date is not None else edit_date - 1
        return self._user_message(
            user_id, first_name, sent_at, message_id, kind="edited_message", text=text, edit_date=edit_date
        )

    def channel_post(self, chat_id: int, text: str, *, title: str = "Channel") -> Json:
        """A `channel_post` update (no `from`, a channel sender_chat)."""
        chat = {"id": chat_id, "type": "channel", "title": title}
        post = {
            "message_id": self._next_message_id(chat_id),
            "chat": chat,
            "sender_chat": chat,
            "date": int(self._now()),
            "text": text,
        }
        return self.push_update({"channel_post": post})

    def reaction(
        self,
        user_id: int,
        message_id: int,
        *,
        new: Sequence[str] = ("❤",),
        old: Sequence[str] = (),
        first_name: str = "Alice",
        date: int | None = None,
    ) -> Json | None:
        """A `message_reaction`: `user_id` changed their reaction to a message of their private chat
        from `old` to `new` emoji. None (ignored, as Telegram has nothing to react to) when that chat
        has no such message."""
        unknown = [e for e in (*new, *old) if e not in REACTION_EMOJI]
        if unknown:
            raise ValueError(f"not a reaction Telegram allows: {unknown}")
        with self._ids_lock:
            if not 0 < message_id <= self._message_ids.get(user_id, 0):
                return None
        reaction = {
            "chat": {"id": user_id, "type": "private", "first_name": first_name},
            "message_id": message_id,
            "user": {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"},
            "date": int(self._now()) if date is None else date,
            "old_reaction": [{"type": "emoji", "emoji": e} for e in old],
            "new_reaction": [{"type": "emoji", "emoji": e} for e in new],
        }
        return self.push_update({"message_reaction": reaction})
