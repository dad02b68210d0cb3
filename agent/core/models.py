"""The model factory: a PydanticAI model from a provider's model string, with our key and our errors.

Every layer that calls a model builds it here (the knowledge graph's LLM, the jobs, the chat), the
offline `demo` model (agent/core/demo.py) included.
"""

from __future__ import annotations

from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, infer_model
from pydantic_ai.models.function import AgentInfo, FunctionModel

from agent.core.errors import ConfigurationError, MissingModelKeyError
from agent.core.settings import Settings


def build_model(model_name: str, settings: Settings, *, setting: str = "MODEL") -> Model:
    """A PydanticAI model from a model string: `demo` is the offline demo model (agent/core/demo.py),
    any other string a provider's model, with its one-line errors."""
    if model_name == "demo":
        from agent.core.demo import demo_model

        return demo_model()
    return provider_model(model_name, settings, setting=setting)


def provider_model(model_name: str, settings: Settings, *, setting: str = "MODEL") -> Model:
    """A PydanticAI model from a provider's model string; Anthropic gets the key from our settings.

    An unknown string, or a provider without its key, raises a one-line `ConfigurationError` naming
    `setting`. The Anthropic SDK reads `ANTHROPIC_BASE_URL` itself, so a proxy or a local fake server
    works without a setting of ours.
    """
    if model_name.startswith("anthropic:"):
        if settings.anthropic_api_key is None:
            raise MissingModelKeyError(
                f"{setting} {model_name} needs ANTHROPIC_API_KEY: put it in the environment or .env,"
                f" or set {setting}=demo to try the bot offline"
            )
        # Imported here, past the key check: the SDK costs about a second, and a job that never calls
        # a model runs without its key.
        from pydantic_ai.models.anthropic import AnthropicModel
        from pydantic_ai.providers.anthropic import AnthropicProvider

        key = settings.anthropic_api_key.get_secret_value()
        return AnthropicModel(model_name.removeprefix("anthropic:"), provider=AnthropicProvider(api_key=key))
    try:
        return infer_model(model_name)
    except UserError as exc:
        message = " ".join(str(exc).split())
        if message.startswith("Unknown model"):
            raise ConfigurationError(
                f"{setting} {model_name!r} is not a model PydanticAI knows ({message}); use provider:name,"
                f" e.g. anthropic:claude-sonnet-5-5, or demo to try the bot offline"
            ) from None
        raise MissingModelKeyError(f"{setting} {model_name}: {message}") from None


def unavailable_model(error: ConfigurationError) -> Model:
    """A model that raises `error` when called: a job that never calls it runs without its key."""

    def refuse(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        raise error

    return FunctionModel(refuse, model_name="unavailable")
