"""graphiti's LLM on any PydanticAI model: SUMMARY_MODEL as a model string (any model).

graphiti asks for structured answers (a pydantic model per prompt). PydanticAI turns an
`output_type` into whatever the provider supports (a forced tool call on Anthropic and OpenAI, and
on OpenAI-compatible local servers), validates it and retries on a malformed answer, so every model
PydanticAI speaks to can drive the graph: `openai:gpt-4.1-mini`, `google-gla:gemini-2.5-flash`, or
an OpenAI-compatible local server (`OPENAI_BASE_URL` with an `openai-chat:` model name: local
servers speak Chat Completions, while `openai:` means the Responses API in PydanticAI 2).
Each call's tokens count towards the user's usage as `graph`.
"""

from __future__ import annotations

from typing import Any

from graphiti_core.llm_client import LLMClient, LLMConfig
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.prompts.models import Message
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models import Model
from pydantic_ai.settings import ModelSettings

from agent.core.usage import record_run

# One agent for every graphiti prompt: the prompt's own system message becomes its instructions and
# its response model the output type, per run.
graph_agent: Agent[None, Any] = Agent(name="graph", output_type=str, defer_model_check=True)


class PydanticAIGraphClient(LLMClient):
    """A graphiti `LLMClient` whose every call is one PydanticAI run on the given model."""

    def __init__(self, model: Model, *, max_tokens: int = 4096, timeout_seconds: float = 45.0) -> None:
        super().__init__(
            LLMConfig(model=model.model_name, small_model=model.model_name, max_tokens=max_tokens)
        )
        self.pydantic_model = model
        self.timeout_seconds = timeout_seconds

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        """One run: the system message as instructions, the rest as the prompt, a typed answer back."""
        system = "\n\n".join(m.content for m in messages if m.role == "system")
        prompt = "\n\n".join(m.content for m in messages if m.role != "system")
        settings = ModelSettings(max_tokens=max_tokens, timeout=self.timeout_seconds)
        if response_model is None:
            result = await graph_agent.run(
                prompt, model=self.pydantic_model, instructions=system or None, model_settings=settings
            )
            record_run("graph", result.usage)
            return {"content": str(result.output)}
        typed = await graph_agent.run(
            prompt,
            output_type=response_model,
            model=self.pydantic_model,
            instructions=system or None,
            model_settings=settings,
        )
        record_run("graph", typed.usage)
        output: BaseModel = typed.output
        return output.model_dump()
