"""The chat agent: module-level, its instructions (persona, then the built context) and its tools."""

from __future__ import annotations

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, UserPromptPart
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.settings import ModelSettings

from agent.chat.deps import TurnDeps
from agent.chat.reminder_tools import reminder_tools
from agent.chat.tools import recall_tools
from agent.core.settings import Settings

chat_agent: Agent[TurnDeps, str] = Agent(
    deps_type=TurnDeps,
    name="nikita",
    defer_model_check=True,
    toolsets=[recall_tools, reminder_tools],
)


@chat_agent.instructions
def _persona_instructions(ctx: RunContext[TurnDeps]) -> str:
    return ctx.deps.persona


@chat_agent.instructions
def _context_instructions(ctx: RunContext[TurnDeps]) -> str:
    # Re-evaluated on every model request and never stored in history (PydanticAI 2.x).
    return ctx.deps.context


def build_model(model_name: str, settings: Settings) -> Model:
    """A PydanticAI model from a model string; Anthropic gets the key from our settings.

    The Anthropic SDK reads `ANTHROPIC_BASE_URL` itself, so a proxy or a local fake server works
    without a setting of ours.
    """
    if model_name.startswith("anthropic:"):
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        key = settings.anthropic_api_key.get_secret_value() if settings.anthropic_api_key else None
        return AnthropicModel(model_name.removeprefix("anthropic:"), provider=AnthropicProvider(api_key=key))
    return infer_model(model_name)


def _offline_reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # Enough to try the memory without a key: it shows what the session's history holds.
    prompts = [p.content for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    earlier = len(prompts) - 1
    return ModelResponse(
        parts=[
            TextPart(
                f"(offline test model) You said {prompts[-1]!r}; I see {earlier} earlier message(s) now."
            )
        ]
    )


def build_chat_model(settings: Settings) -> Model:
    """The chat model; `MODEL=test` is an offline echo (PydanticAI's TestModel would call every tool
    with made-up arguments, which is right for schema tests and wrong for trying the bot)."""
    if settings.model == "test":
        return FunctionModel(_offline_reply, model_name="offline-test")
    return build_model(settings.model, settings)


def chat_model_settings(settings: Settings) -> ModelSettings:
    """Output cap and timeout for the chat model."""
    model_settings = ModelSettings(timeout=settings.model_timeout_seconds)
    if settings.model_max_tokens is not None:
        model_settings["max_tokens"] = settings.model_max_tokens
    return model_settings
