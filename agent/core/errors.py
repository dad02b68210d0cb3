"""The project's error hierarchy: one base, specific subclasses."""

from __future__ import annotations


class NikitaError(Exception):
    """Base of every error the project raises on purpose."""


class ConfigurationError(NikitaError):
    """A setting is missing or invalid; raised at start, never mid-conversation."""


class StartupError(NikitaError):
    """Something the process needs at start does not answer (network, database, port): one line, exit."""


class UserNotFoundError(NikitaError):
    """No user with that key exists."""


class UserForgottenError(UserNotFoundError):
    """The user was forgotten (/forget) while something was about to write for them: write nothing."""


class LeaseLostError(NikitaError):
    """A worker's lease on a row (an inbox update, a touchpoint) ran out and another worker holds the
    row now: this one stops touching it."""


class MissingModelKeyError(ConfigurationError):
    """A model string names a provider whose key is not configured."""


class TokenizerUnavailableError(NikitaError):
    """The bundled BPE data for an encoding is missing or does not match tiktoken's hash."""
