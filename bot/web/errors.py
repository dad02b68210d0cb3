"""Errors of the web app: input a client sent wrong, and answers other than 200."""

from __future__ import annotations

from agent.core.errors import NikitaError


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
