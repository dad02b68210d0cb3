"""Every error `bot/` raises on purpose: input a client or Telegram sent wrong, answers other than
200, files and transcripts the bot could not get. Each is a `NikitaError` (agent/core/errors.py)."""

from __future__ import annotations

from agent.core.errors import LeaseLostError, NikitaError

# web: input a client sent wrong, and answers other than 200.


class IdFormatError(NikitaError, ValueError):
    """Not an id at all: not an integer, or not written in ASCII digits."""


class JsonInputError(NikitaError, ValueError):
    """A body that is not JSON, or is JSON nested deeper than `MAX_DEPTH`: the client's fault (400)."""


class ApiError(NikitaError):
    """An answer other than 200, with a short message for the page."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class InitDataError(NikitaError):
    """initData is missing, malformed, not signed for this bot, or too old."""


# delivery: updates that are not updates, rows the intake did not store.


class NotAnUpdateError(NikitaError):
    """JSON that is not a Telegram update object (a webhook body answered 400)."""


class NotStoredError(LeaseLostError):
    """The intake's commit of the row failed: the update was not acknowledged and comes again."""


# handlers: media the bot could not take in.


class FileTooLargeError(NikitaError):
    """A file over its cap, found before or during the download."""


class TranscriptionError(NikitaError):
    """The endpoint did not give us a transcript (refused, unreachable, or an empty answer)."""
