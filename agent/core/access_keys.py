"""How a person or a group is named in access rules: a Telegram id ("123"), a username ("alice",
no @) or a group's chat id ("-1001234567890": group chat ids are negative, so they never name a person)."""

from __future__ import annotations

import re

# Telegram usernames: 5-32 letters, digits and underscores, starting with a letter (a few older
# ones are shorter, so 3 is accepted).
_USERNAME = re.compile(r"[a-z][a-z0-9_]{2,31}")


def access_key(text: str) -> str | None:
    """The stored form of "123", "-100123", "@Alice" or "alice": the id or the lowercased username."""
    text = text.strip()
    if is_id(text):
        return str(int(text))
    name = text.removeprefix("@").lower()
    return name if _USERNAME.fullmatch(name) else None


def is_id(key: str) -> bool:
    """Whether a key is a Telegram id (a person's, or a group's negative chat id)."""
    digits = key.removeprefix("-")
    return digits.isascii() and digits.isdigit()  # "²" is a digit to isdigit(), not to int()


def keys_of(telegram_id: int, username: str | None) -> list[str]:
    """Every key that names this Telegram user."""
    keys = [str(telegram_id)]
    if username:
        keys.append(username.lower())
    return keys
