"""An embedder for tests and benchmarks: hashed bags of words, no model to load. The fake embeddings
server (embeddings_api.py) answers with it, and tests that need vectors but not meaning pass it as
the embedder."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

from agent.search.embeddings import MINILM_DIMENSIONS, InputType, Vectors, normalise

_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Feature-hashed bag of words: fast and deterministic.

    Texts sharing words get a positive cosine, texts without shared words about 0; it knows no
    synonyms. A text without any word is hashed as one empty token so every row has unit length.
    """

    name = "hashing"

    def __init__(self, *, dimensions: int = MINILM_DIMENSIONS) -> None:
        self.dimensions = dimensions

    async def embed(self, texts: Sequence[str], *, input_type: InputType = "document") -> Vectors:
        """Return one normalised hashed bag-of-words row per text."""
        out = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _WORD.findall(text.lower()) or [""]:
                # blake2b, not hash(): stable across processes regardless of PYTHONHASHSEED.
                digest = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "big")
                out[row, digest % self.dimensions] += 1.0 if digest >> 63 else -1.0
        return normalise(out)
