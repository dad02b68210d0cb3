"""The update of a worked inbox row: python-telegram-bot's `Update` that carries its row.

The dispatcher builds one per leased row and passes it to `application.process_update`; the row
travels with the update through python-telegram-bot, and the handlers' context reads it from there
(`HandlerContext.from_update`, bot/handlers/context.py), as in PTB's `contexttypesbot.py`.
"""

from __future__ import annotations

from typing import Any

from telegram import Bot, Update

from bot.delivery.worked_row import WorkedRow


class WorkedUpdate(Update):
    """An update read from its inbox row, with the row it came in."""

    __slots__ = ("_row",)
    # Private: PTB's objects are frozen, except for attributes whose names start with "_".
    _row: WorkedRow

    @classmethod
    def of(cls, row: WorkedRow, bot: Bot) -> WorkedUpdate:
        """The update stored on `row`; raises what `Update.de_json` raises for JSON it cannot read."""
        payload: dict[str, Any] = row.row.payload or {}
        update = cls.de_json(payload, bot)
        if not isinstance(update, cls):  # `de_json` builds the class it is called on
            raise TypeError(f"de_json gave a {type(update).__name__}")
        update._row = row
        return update

    @property
    def row(self) -> WorkedRow:
        """The inbox row this update came in."""
        return self._row
