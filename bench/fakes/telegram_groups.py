"""Group chats in the fake Bot API: members' messages (topics, replies, mentions), the bot added or
removed (my_chat_member), a group becoming a supergroup, and the admin look-ups a bot makes
(getChatMember, getChatAdministrators, leaveChat), shaped as Telegram sends them.

Ephemeral commands and answers (Bot API 10.2): `group_command(..., ephemeral=True)` delivers a command
the way a current Telegram app sends one the bot's group menu marks is_ephemeral, with an
ephemeral_message_id; sendMessage takes an answer seen by one member only (receiver_user_id, or 10.3's
ephemeral_message_parameters) that replies to it (reply_parameters.ephemeral_message_id). With
`ephemeral_sends = False` the fake is a server older than 10.2: it ignores the parameters it does not
know and refuses a reply_parameters without message_id, as such a server does (a test may still
deliver an ephemeral command to it, to drive a bot's fallback).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from bench.fakes.telegram_markup import bad_request

Json = dict[str, Any]

# What a ChatMemberAdministrator carries besides status and user (every field Telegram requires).
_ADMIN_RIGHTS = dict.fromkeys(
    (
        "can_manage_chat",
        "can_delete_messages",
        "can_manage_video_chats",
        "can_restrict_members",
        "can_change_info",
        "can_invite_users",
        "can_post_stories",
        "can_edit_stories",
        "can_delete_stories",
        "can_pin_messages",
        "can_manage_topics",
    ),
    True,
) | {"can_be_edited": False, "is_anonymous": False, "can_promote_members": False}


def group_chat(chat_id: int, title: str, *, forum: bool = False) -> Json:
    """A Chat object of a group (a supergroup when its id is -100...)."""
    kind = "supergroup" if chat_id <= -(10**12) else "group"
    chat: Json = {"id": chat_id, "type": kind, "title": title}
    if forum:
        chat["is_forum"] = True
    return chat


def person(user_id: int, first_name: str) -> Json:
    """A User object of a member."""
    return {"id": user_id, "is_bot": False, "first_name": first_name, "language_code": "en"}


def member(user: Json, status: str) -> Json:
    """A ChatMember object with the fields its status requires."""
    if status == "administrator":
        return {"status": status, "user": user, **_ADMIN_RIGHTS}
    if status == "creator":
        return {"status": status, "user": user, "is_anonymous": False}
    if status == "kicked":
        return {"status": status, "user": user, "until_date": 0}
    return {"status": status, "user": user}


class GroupApi:
    """Group updates for the tests to push, and the group methods of the Bot API."""

    bot_user: Json
    commands: dict[tuple[str, str], list[Json]]
    _now: Callable[[], float]
    _bot_messages: dict[tuple[int | str, int], Json]

    def _init_groups(self) -> None:
        self._groups_lock = threading.Lock()
        # chat id -> user id -> status ("creator", "administrator"); everyone else is a member.
        self.group_admins: dict[int, dict[int, str]] = {}
        self.left_chats: list[int] = []
        self.titles: dict[int, str] = {}
        # False: a Bot API server older than 10.2, which refuses ephemeral answers.
        self.ephemeral_sends = True
        # (chat id, ephemeral message id) -> the one member who sees it; an ephemeral answer replies to one.
        self.ephemeral: dict[tuple[int, int], int] = {}
        self._next_ephemeral_id = 1

    def push_update(self, update: Json) -> Json:
        """Queue one update (implemented by the server)."""
        raise NotImplementedError

    def _next_message_id(self, chat_id: int | str) -> int:
        raise NotImplementedError

    def _now_int(self) -> int:
        return int(self._now())

    def make_admin(self, chat_id: int, user_id: int, *, status: str = "administrator") -> None:
        """`user_id` administers the group from now on (getChatMember and getChatAdministrators say so)."""
        with self._groups_lock:
            self.group_admins.setdefault(chat_id, {})[user_id] = status

    def group_message(
        self,
        chat_id: int,
        user_id: int,
        text: str | None = None,
        *,
        first_name: str = "Ana",
        title: str = "Friends",
        entities: list[Json] | None = None,
        reply_to: int | None = None,
        thread_id: int | None = None,
        date: int | None = None,
        **content: Any,
    ) -> Json:
        """A member's message in a group; `reply_to` a message id of that chat (the bot's or a
        member's), `thread_id` a forum topic's id (the chat is then a forum)."""
        self.titles.setdefault(chat_id, title)
        message: Json = {
            "message_id": self._next_message_id(chat_id),
            "from": person(user_id, first_name),
            "chat": group_chat(chat_id, self.titles[chat_id], forum=thread_id is not None),
            "date": self._now_int() if date is None else date,
            "text": text,
            "entities": entities,
            **content,
        }
        replied = self._bot_messages.get((chat_id, reply_to)) if reply_to is not None else None
        if reply_to is not None:
            message["reply_to_message"] = replied or {
                "message_id": reply_to,
                "chat": message["chat"],
                "date": message["date"],
            }
        if thread_id is not None:
            message["message_thread_id"] = thread_id
            message["is_topic_message"] = True
            # Telegram shows a topic's messages as replies to the message that created the topic.
            message.setdefault(
                "reply_to_message",
                {
                    "message_id": thread_id,
                    "chat": message["chat"],
                    "date": message["date"],
                    "forum_topic_created": {"name": "Topic", "icon_color": 7322096},
                    "message_thread_id": thread_id,
                    "is_topic_message": True,
                },
            )
        return self.push_update({"message": {k: v for k, v in message.items() if v is not None}})

    def mention(self, chat_id: int, user_id: int, text: str, **kwargs: Any) -> Json:
        """A group message whose text holds the bot's @username, with the mention entity Telegram adds."""
        handle = "@" + str(self.bot_user["username"])
        if handle not in text:
            text = f"{handle} {text}"
        entity = {"type": "mention", "offset": len(text[: text.index(handle)].encode("utf-16-le")) // 2}
        entity["length"] = len(handle)
        return self.group_message(chat_id, user_id, text, entities=[entity], **kwargs)

    def group_command(
        self, chat_id: int, user_id: int, text: str, *, ephemeral: bool = False, **kwargs: Any
    ) -> Json:
        """A command in a group ("/timezone Lisbon" or "/help@botname"), with its bot_command entity;
        `ephemeral`: picked from the group menu where the bot marks it is_ephemeral, so only the sender
        and the bot see it (it then carries an ephemeral_message_id, and receiver_user is the bot)."""
        entity = {"type": "bot_command", "offset": 0, "length": len(text.split()[0])}
        if ephemeral:
            name = text.split()[0].lstrip("/").split("@")[0]
            menu = self.commands.get(("all_group_chats", ""), self.commands.get(("default", ""), []))
            if not any(c.get("command") == name and c.get("is_ephemeral") is True for c in menu):
                raise AssertionError(f"no ephemeral /{name} in the bot's group menu: an app sends it as is")
            with self._groups_lock:
                ephemeral_id, self._next_ephemeral_id = self._next_ephemeral_id, self._next_ephemeral_id + 1
                self.ephemeral[(chat_id, ephemeral_id)] = user_id
            kwargs.update(ephemeral_message_id=ephemeral_id, receiver_user=self.bot_user)
        return self.group_message(chat_id, user_id, text, entities=[entity], **kwargs)

    def my_chat_member(
        self,
        chat_id: int,
        user_id: int,
        *,
        old: str,
        new: str,
        first_name: str = "Ana",
        title: str = "Friends",
    ) -> Json:
        """The bot's own membership in a group changed (e.g. "left" -> "member": added; -> "kicked")."""
        self.titles.setdefault(chat_id, title)
        change = {
            "chat": group_chat(chat_id, self.titles[chat_id]),
            "from": person(user_id, first_name),
            "date": self._now_int(),
            "old_chat_member": member(self.bot_user, old),
            "new_chat_member": member(self.bot_user, new),
        }
        return self.push_update({"my_chat_member": change})

    def migrate(self, old_chat_id: int, new_chat_id: int, *, user_id: int, first_name: str = "Ana") -> None:
        """A group became a supergroup: the service message in the old chat, then the one in the new."""
        title = self.titles.setdefault(old_chat_id, "Friends")
        self.titles[new_chat_id] = title
        now = self._now_int()
        for chat_id, field, other in (
            (old_chat_id, "migrate_to_chat_id", new_chat_id),
            (new_chat_id, "migrate_from_chat_id", old_chat_id),
        ):
            message = {
                "message_id": self._next_message_id(chat_id),
                "from": person(user_id, first_name),
                "chat": group_chat(chat_id, title),
                "date": now,
                field: other,
            }
            self.push_update({"message": message})

    # -- Bot API methods ---------------------------------------------------------------------------
    def _ephemeral_fields(self, p: Json) -> Json:
        """The fields sendMessage adds to an ephemeral answer (none to an ordinary one), after the checks
        Telegram makes: an ephemeral message only answers an ephemeral message of its receiver."""
        reply = p.get("reply_parameters") or {}
        if not self.ephemeral_sends:
            if reply and "message_id" not in reply:
                raise bad_request('Can\'t find field "message_id"')
            return {}  # receiver_user_id and the rest are unknown here: ignored, the message is public
        replied = reply.get("ephemeral_message_id")
        receiver = (p.get("ephemeral_message_parameters") or {}).get("receiver_user_id")
        flat = p.get("receiver_user_id")
        if receiver is not None and flat is not None and receiver != flat:
            raise bad_request("receiver_user_id differs from ephemeral_message_parameters.receiver_user_id")
        receiver = flat if receiver is None else receiver
        if replied is None and receiver is None:
            return {}
        chat_id = int(p["chat_id"])
        if receiver is None or replied is None:
            raise bad_request("an ephemeral message needs a receiver and an ephemeral message to reply to")
        with self._groups_lock:
            if self.ephemeral.get((chat_id, int(replied))) != int(receiver):
                raise bad_request("ephemeral message to be replied not found")
            ephemeral_id, self._next_ephemeral_id = self._next_ephemeral_id, self._next_ephemeral_id + 1
            self.ephemeral[(chat_id, ephemeral_id)] = int(receiver)
        return {"ephemeral_message_id": ephemeral_id, "receiver_user": person(int(receiver), "Member")}

    def _status(self, chat_id: int, user_id: int) -> str:
        with self._groups_lock:
            return self.group_admins.get(chat_id, {}).get(user_id, "member")

    async def _api_getChatMember(self, p: Json, files: Any) -> Json:
        chat_id, user_id = int(p["chat_id"]), int(p["user_id"])
        user = self.bot_user if user_id == self.bot_user["id"] else person(user_id, "Member")
        return member(user, self._status(chat_id, user_id))

    async def _api_getChatAdministrators(self, p: Json, files: Any) -> list[Json]:
        chat_id = int(p["chat_id"])
        with self._groups_lock:
            admins = dict(self.group_admins.get(chat_id, {}))
        return [member(person(uid, "Member"), status) for uid, status in admins.items()]

    async def _api_leaveChat(self, p: Json, files: Any) -> bool:
        with self._groups_lock:
            self.left_chats.append(int(p["chat_id"]))
        return True
