"""Errors of search: embedders that cannot embed, recall arguments that name nothing."""

from __future__ import annotations

from agent.core.errors import NikitaError


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
