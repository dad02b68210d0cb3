"""Graphiti's LLM on `SUMMARY_MODEL` through the Anthropic SDK (so `ANTHROPIC_BASE_URL` reaches it)."""

from __future__ import annotations

from anthropic import AsyncAnthropic
from graphiti_core.llm_client import LLMClient, LLMConfig
from graphiti_core.llm_client.anthropic_client import AnthropicClient


def model_name(model: str) -> str:
    """Strip PydanticAI's provider prefix: `anthropic:claude-haiku-4-5` -> `claude-haiku-4-5`."""
    return model.removeprefix("anthropic:")


def anthropic_llm_client(
    model: str,
    *,
    api_key: str | None,
    base_url: str | None = None,
    timeout_seconds: float = 45.0,
    max_tokens: int = 4096,
    max_retries: int = 2,
) -> LLMClient:
    """Graphiti's own AnthropicClient (tool-use structured output) over an AsyncAnthropic we configure.

    `base_url=None` lets the SDK read `ANTHROPIC_BASE_URL` itself. `max_tokens` stays well under the
    SDK's non-streaming ceiling: graphiti calls `messages.create` without streaming.
    """
    name = model_name(model)
    client = AsyncAnthropic(
        api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=max_retries
    )
    config = LLMConfig(
        api_key=api_key, model=name, small_model=name, max_tokens=max_tokens, temperature=0.0
    )
    return AnthropicClient(config=config, client=client, max_tokens=max_tokens)
