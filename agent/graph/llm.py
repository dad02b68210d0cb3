"""Graphiti's LLM on `SUMMARY_MODEL` through the Anthropic SDK (so `ANTHROPIC_BASE_URL` reaches it)."""

from __future__ import annotations

import json
from typing import Any, cast

import anthropic
from anthropic import AsyncAnthropic
from anthropic.types import MessageParam
from graphiti_core.llm_client import LLMClient, LLMConfig
from graphiti_core.llm_client.anthropic_client import AnthropicClient
from graphiti_core.llm_client.config import ModelSize
from graphiti_core.llm_client.errors import RateLimitError
from graphiti_core.prompts.models import Message
from pydantic import BaseModel

from agent.core.usage import record_call


def model_name(model: str) -> str:
    """Strip PydanticAI's provider prefix: `anthropic:claude-haiku-4-5` -> `claude-haiku-4-5`."""
    return model.removeprefix("anthropic:")


class SummaryModelClient(AnthropicClient):
    """graphiti's AnthropicClient (forced tool call per response model, validation retries) on SDK 2.x.

    graphiti 0.31 sends `temperature`, which `messages.create` of anthropic 2.x no longer accepts;
    this overrides only the request itself.
    """

    async def _generate_response(  # type: ignore[override]
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> tuple[dict[str, Any], int, int]:
        """One Messages API call; returns the tool input and the token usage."""
        tools, tool_choice = self._create_tool(response_model)
        effective_model = model or self.model
        turns = [{"role": m.role, "content": m.content} for m in messages[1:]]
        try:
            result = await self.client.messages.create(
                model=effective_model,
                system=messages[0].content,
                messages=cast(list[MessageParam], turns),
                max_tokens=self._resolve_max_tokens(max_tokens, effective_model),
                tools=tools,
                tool_choice=tool_choice,
            )
        except anthropic.RateLimitError as exc:
            raise RateLimitError(str(exc)) from exc  # type: ignore[no-untyped-call]
        usage = _record(result.usage)
        for block in result.content:
            if block.type == "tool_use":
                data = block.input if isinstance(block.input, dict) else json.loads(str(block.input))
                return cast(dict[str, Any], data), *usage
        for block in result.content:
            if block.type == "text":
                return self._extract_json_from_text(block.text), *usage
        raise ValueError("the model answered without a tool call or JSON")


def _record(usage: anthropic.types.Usage) -> tuple[int, int]:
    """Meter one call as PydanticAI would count it (the Messages API leaves cached tokens out of
    `input_tokens`); returns the input and output tokens."""
    read = usage.cache_read_input_tokens or 0
    written = usage.cache_creation_input_tokens or 0
    input_tokens = usage.input_tokens + read + written
    record_call(
        "graph",
        input_tokens=input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=read,
        cache_write_tokens=written,
        cache_write_1h_tokens=usage.cache_creation.ephemeral_1h_input_tokens if usage.cache_creation else 0,
    )
    return input_tokens, usage.output_tokens


def anthropic_llm_client(
    model: str,
    *,
    api_key: str | None,
    base_url: str | None = None,
    timeout_seconds: float = 45.0,
    max_tokens: int = 4096,
    max_retries: int = 2,
) -> LLMClient:
    """The graph's LLM client on an AsyncAnthropic we configure.

    `base_url=None` lets the SDK read `ANTHROPIC_BASE_URL` itself. `max_tokens` stays well under the
    SDK's non-streaming ceiling: graphiti's requests do not stream.
    """
    name = model_name(model)
    client = AsyncAnthropic(
        api_key=api_key, base_url=base_url, timeout=timeout_seconds, max_retries=max_retries
    )
    config = LLMConfig(api_key=api_key, model=name, small_model=name, max_tokens=max_tokens)
    return SummaryModelClient(config=config, client=client, max_tokens=max_tokens)
