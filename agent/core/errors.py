"""Every error `agent/` raises on purpose, in one hierarchy under `NikitaError`, grouped by the
folder that raises it. Callers catch the specific class; `except NikitaError` catches them all but
`EmbeddedGraphInUseError`, which stays an `OSError` for the callers that handle the file's lock."""

from __future__ import annotations

from typing import Literal


class NikitaError(Exception):
    """Base of every error the project raises on purpose."""


# core: settings, start-up, users, leases, token counting.


class ConfigurationError(NikitaError):
    """A setting is missing or invalid; raised at start, never mid-conversation."""


class MissingModelKeyError(ConfigurationError):
    """A model string names a provider whose key is not configured."""


class StartupError(NikitaError):
    """Something the process needs at start does not answer (network, database, port): one line, exit."""


class UserNotFoundError(NikitaError):
    """No user with that key exists."""


class UserForgottenError(UserNotFoundError):
    """The user was forgotten (/forget) while something was about to write for them: write nothing."""


class LeaseLostError(NikitaError):
    """A worker's lease on a row (an inbox update, a touchpoint) ran out and another worker holds the
    row now: this one stops touching it."""


class TokenizerUnavailableError(NikitaError):
    """The bundled BPE data for an encoding is missing or does not match tiktoken's hash."""


# search: embedders that cannot embed, recall arguments that name nothing.


class EmbedderUnavailableError(NikitaError):
    """The embedding model or its tokenizer cannot be found or loaded."""


class EmbeddingFailedError(EmbedderUnavailableError):
    """The embedding model failed a request (after its client's retries) or answered nonsense."""


class EmbeddingRefusedError(EmbeddingFailedError):
    """The provider refused the key or does not know the model: a setting to fix, not a hiccup."""


class EmbeddingWidthError(EmbeddingFailedError):
    """The model answered with vectors of another width than its vector space's."""


class RecallNotFoundError(NikitaError):
    """The id names nothing of this user (another user's ids look exactly like missing ones)."""


class RecallInputError(NikitaError):
    """The arguments do not form one of the accepted shapes."""


# graph: callers degrade the context on these, never the reply.


class GraphError(NikitaError):
    """The graph database or graphiti failed (connection, query, extraction, timeout)."""


class GraphOpeningError(GraphError):
    """The graph is still opening (the first seconds after a start): a read goes on without it."""


class EmbeddedGraphInUseError(OSError):
    """The embedded graph's file is open in another process (the bot, usually): one process each."""


class EmbeddingInputError(NikitaError):
    """Graphiti passed token ids instead of text; our embedders only take text."""


# memory and reminders: what the policy refuses; the message says what to change.


class FactRejectedError(NikitaError):
    """A fact the memory policy refuses: empty, too long, or a transcript excerpt."""


class ReminderRejectedError(NikitaError):
    """The reminder cannot be set as given; the message says what to ask or change."""


# chat: documents that cannot be read.


class UnreadablePdfError(NikitaError):
    """A PDF with no text to read: broken, protected by a password, or only scanned images."""


class DocumentTooHeavyError(UnreadablePdfError):
    """A document that needs more time or memory to parse than one file is given."""

    def __init__(self, reason: Literal["deadline", "memory", "killed"], detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


# touchpoints: what the sender the bot wires in reports back.


class RecipientBlockedError(NikitaError):
    """Telegram refused the chat for good (403: the user blocked the bot or deleted their account)."""


class SendFailedError(NikitaError):
    """Telegram did not take the message this time (network, flood control, a server error)."""


# voice: each one maps to one HTTP answer in bot/web/voice.py, never to a 500.


class VoiceError(NikitaError):
    """Base of the voice calls' errors."""


class VoiceAuthError(VoiceError):
    """A missing, forged or expired call token or webhook signature (HTTP 401)."""


class VoiceRequestError(VoiceError):
    """A request the voice agent can fix: unknown tool, bad arguments, malformed body (HTTP 400)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class VoiceUserNotFoundError(VoiceError):
    """The user named in /voice/initiate does not exist (HTTP 404)."""
