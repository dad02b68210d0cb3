"""How a person is named in access rules: a Telegram id ("123") or a username ("alice", no @)."""

from __future__ import annotations

import re

# Telegram usernames: 5-32 letters, digits and underscores, starting with a letter (a few older
# ones are shorter, so 3 is accepted).
_USERNAME = re.compile(r"[a-z][a-z0-9_]{2,31}")


def access_key(text: str) -> str | None:
    """The stored form of "123", "@Alice" or "alice": the id's digits or the lowercased username."""
    text = text.strip()
    if text.isdigit():
        return str(int(text))
    name = text.removeprefix("@").lower()
    return name if _USERNAME.fullmatch(name) else None


def keys_of(telegram_id: int, username: str | None) -> list[str]:
    """Every key that names this Telegram user."""
    keys = [str(telegram_id)]
    if username:
        keys.append(username.lower())
    return keys
