"""What a failed update means: whether the same work survives a moment later, and the apologies.

Shared by the dispatcher, which retries and apologises, and the handlers' error handler, which
logs a failure the way the dispatcher will treat it.
"""

from __future__ import annotations

from telegram.error import BadRequest, NetworkError, RetryAfter

from db.transient import is_transient

ERROR_REPLY = (
    "Sorry, something went wrong on my side and I couldn't answer that. "
    "Your message may not have reached me; please try again in a moment."
)
DELAYED_REPLY = (
    "Sorry, I'm having trouble reaching my memory right now. I've kept your message and I'll "
    "answer it as soon as I can."
)


def is_retryable(exc: BaseException) -> bool:
    """A failure the same work survives a moment later: the database or Telegram's network."""
    # PTB's BadRequest is a NetworkError too, and it never heals by itself.
    telegram = isinstance(exc, NetworkError | RetryAfter) and not isinstance(exc, BadRequest)
    return telegram or is_transient(exc)
