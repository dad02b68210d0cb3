"""The names EMBEDDER takes, in their canonical form: the one each stored vector records.

Kept apart from the embedders themselves so that the check at start reads a name without loading
any embedding library.
"""

from __future__ import annotations

LOCAL_EMBEDDERS = ("minilm", "multilingual-e5-small")
NAME_CHARS = 64  # search_chunks.embedder
ALIASES = {"voyage": "voyageai"}


def embedder_string(value: str) -> str:
    """EMBEDDER in its canonical form; raises ValueError for a value that names no embedder."""
    value = value.strip()
    if value in (*LOCAL_EMBEDDERS, "none"):
        return value
    provider, _, model = value.partition(":")
    if not provider or not model:
        raise ValueError(
            f"{value!r} is none, minilm, multilingual-e5-small or a PydanticAI embedding model "
            "such as openai:text-embedding-3-small"
        )
    canonical = f"{ALIASES.get(provider, provider)}:{model}"
    if len(canonical) > NAME_CHARS:
        raise ValueError(f"{canonical!r} is longer than {NAME_CHARS} characters (each vector records it)")
    return canonical
