"""Settings of group chats: whether the bot joins them, their pace, limits and what crosses from them."""

from __future__ import annotations

from agent.core.settings.base import SettingsGroup


class GroupSettings(SettingsGroup):
    """GROUPS_* and GROUP_*."""

    # Group chats (docs/groups.md): off, the bot leaves a group it is added to with a short note.
    groups_enabled: bool = True
    # A member's private chat may recall what that member said in groups (their own words only);
    # off, a private chat sees the private memory only.
    group_recall_own_words: bool = False
    # Telegram takes about 20 messages a minute into one group; the bot's answers keep under this.
    group_messages_per_minute: int = 20
    # Messages a group may address to the bot per minute and per day (every member together), and
    # the daily tokens of a group's turns; 0 turns a limit off.
    group_rate_limit_per_minute: int = 30
    group_rate_limit_per_day: int = 1000
    group_daily_tokens: int = 1_000_000
