"""Errors of the chat's attachments: documents that cannot be read."""

from __future__ import annotations

from typing import Literal

from agent.core.errors import NikitaError


class UnreadablePdfError(NikitaError):
    """A PDF with no text to read: broken, protected by a password, or only scanned images."""


class DocumentTooHeavyError(UnreadablePdfError):
    """A document that needs more time or memory to parse than one file is given."""

    def __init__(self, reason: Literal["deadline", "memory", "killed"], detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
