"""The buttons under a reminder and beside each one in /reminders, and their callback data.

`reminder:<action>:<id>[:<choice>]`: done, snooze (10m, 1h, tomorrow) and cancel. The handler acts
only on a reminder of the chat pressed in: the presser's own, or in a group the group's
(bot/handlers/reminders.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from telegram import InlineKeyboardButton, InlineKeyboardMarkup

PREFIX = "reminder"
SNOOZE_LABELS = (("10m", "Snooze 10 min"), ("1h", "Snooze 1 h"), ("tomorrow", "Tomorrow"))


@dataclass(frozen=True)
class Press:
    """A pressed reminder button, parsed."""

    action: str
    reminder_id: int
    choice: str | None = None


def reminder_buttons(reminder_id: int) -> InlineKeyboardMarkup:
    """Done, and snooze for 10 minutes, an hour or until tomorrow."""
    return InlineKeyboardMarkup(
        [
            [InlineKeyboardButton("Done ✓", callback_data=f"{PREFIX}:done:{reminder_id}")],
            [
                InlineKeyboardButton(
                    f"Snooze {label}", callback_data=f"{PREFIX}:snooze:{reminder_id}:{choice}"
                )
                for choice, label in SNOOZE_LABELS
            ],
        ]
    )


def cancel_button(reminder_id: int, label: str) -> InlineKeyboardButton:
    """The cancel button beside one reminder of /reminders."""
    return InlineKeyboardButton(f"Cancel: {label}", callback_data=f"{PREFIX}:cancel:{reminder_id}")


def parse_press(data: str | None) -> Press | None:
    """The press, or None for data that is not a reminder button's."""
    parts = (data or "").split(":")
    if len(parts) < 3 or parts[0] != PREFIX or not parts[2].isdigit():
        return None
    action, reminder_id = parts[1], int(parts[2])
    choice = parts[3] if len(parts) > 3 else None
    if action in ("done", "cancel") and choice is None:
        return Press(action, reminder_id)
    if action == "snooze" and choice in dict(SNOOZE_LABELS):
        return Press(action, reminder_id, choice)
    return None
