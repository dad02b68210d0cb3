"""An instant, deterministic graphiti `LLMClient` for tests and the benchmark (never for users).

It answers each graphiti prompt by its response model with a tiny rule-based reading of the episode:
capitalised words become entities, each sentence naming one becomes a fact from the speaker to it.
Tests replace single answers through `handlers` (e.g. to make the dedupe prompt report a contradiction).
"""

from __future__ import annotations

import ast
import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from graphiti_core.llm_client import LLMClient, LLMConfig
from graphiti_core.llm_client.config import DEFAULT_MAX_TOKENS, ModelSize
from graphiti_core.prompts.models import Message
from pydantic import BaseModel

from agent.core.errors import NikitaError
from agent.core.tokens import get_counter
from agent.core.usage import record_call

Json = dict[str, Any]
Handler = Callable[["ScriptedCall"], Json]

SPEAKER = "User"
_NAME = re.compile(r"\b[A-Z][a-zA-Z]+\b")
_SENTENCE = re.compile(r"[^.!?\n]+")
_NOT_NAMES = frozenset(
    {"I", "The", "A", "An", "We", "He", "She", "It", "They", "You", "My", "Our", "This", "That"}
)
_VERBS = (
    ("live", "LIVES_IN"),
    ("moved", "LIVES_IN"),
    ("work", "WORKS_AT"),
    ("like", "LIKES"),
    ("love", "LOVES"),
)


class ScriptedLLMError(NikitaError):
    """The scripted model was asked a prompt it has no answer for."""


@dataclass(frozen=True)
class ScriptedCall:
    """One prompt graphiti sent: its name, the response model and the prompt text."""

    prompt_name: str | None
    response_model: str
    text: str

    def section(self, tag: str) -> str:
        """The text between `<TAG>` and `</TAG>` in the prompt ('' when absent)."""
        match = re.search(rf"<{tag}>\n?(.*?)\n?</{tag}>", self.text, re.DOTALL)
        return match.group(1).strip() if match else ""

    def json_section(self, tag: str) -> Any:
        """The data inside a section: JSON, or a Python literal (some prompts embed a list's repr)."""
        text = self.section(tag)
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return None

    def episode(self) -> str:
        """The episode being processed, however the prompt labels it."""
        for tag in ("CURRENT MESSAGE", "CURRENT_MESSAGE", "TEXT", "JSON"):
            if found := self.section(tag):
                return found
        return ""


def names_in(text: str) -> list[str]:
    """Capitalised words, in order, each once (the scripted notion of an entity)."""
    seen: list[str] = []
    for name in _NAME.findall(text):
        if name not in _NOT_NAMES and name not in seen and name != SPEAKER:
            seen.append(name)
    return seen


def _relation(sentence: str) -> str:
    lowered = sentence.lower()
    return next((relation for verb, relation in _VERBS if verb in lowered), "RELATES_TO")


def extract_entities(call: ScriptedCall) -> Json:
    """The speaker plus every capitalised name of the episode."""
    names = [SPEAKER, *names_in(call.episode())]
    return {"extracted_entities": [{"name": name, "entity_type_id": 0} for name in names]}


def extract_edges(call: ScriptedCall) -> Json:
    """One fact per sentence that names an entity: speaker -> first name in it."""
    edges = []
    for sentence in _SENTENCE.findall(call.episode()):
        names = names_in(sentence)
        text = sentence.strip()
        if names and text:
            edges.append(
                {
                    "source_entity_name": SPEAKER,
                    "target_entity_name": names[0],
                    "relation_type": _relation(text),
                    "fact": text,
                }
            )
    return {"edges": edges}


def resolve_nodes(call: ScriptedCall) -> Json:
    """An extracted entity duplicates an existing one of the same name (case-insensitive)."""
    extracted = call.json_section("ENTITIES") or []
    existing = call.json_section("EXISTING ENTITIES") or []
    by_name = {str(node.get("name", "")).lower(): node.get("candidate_id", -1) for node in existing}
    return {
        "entity_resolutions": [
            {
                "id": node.get("id", index),
                "name": node.get("name", ""),
                "duplicate_candidate_id": by_name.get(str(node.get("name", "")).lower(), -1),
            }
            for index, node in enumerate(extracted)
        ]
    }


def no_duplicates(call: ScriptedCall) -> Json:
    """No fact duplicates or contradicts another."""
    return {"duplicate_facts": [], "contradicted_facts": []}


def true_from_reference_time(call: ScriptedCall) -> Json:
    """A present-tense fact holds from the episode's reference time on, as a real model would say."""
    reference = call.section("REFERENCE TIME") or call.section("REFERENCE_TIME")
    return {"valid_at": reference.split()[0] if reference else None, "invalid_at": None}


DEFAULT_HANDLERS: dict[str, Handler] = {
    "ExtractedEntities": extract_entities,
    "ExtractedEdges": extract_edges,
    "NodeResolutions": resolve_nodes,
    "EdgeDuplicate": no_duplicates,
    "EdgeTimestamps": true_from_reference_time,
    "SummarizedEntities": lambda call: {"summaries": []},
    "EntitySummary": lambda call: {"summary": ""},
    "Summary": lambda call: {"summary": ""},
    "SummaryDescription": lambda call: {"description": ""},
}


class ScriptedLLMClient(LLMClient):
    """Answers graphiti's prompts instantly (or after `delay` seconds) and records every call."""

    def __init__(self, handlers: dict[str, Handler] | None = None, *, delay: float = 0.0) -> None:
        super().__init__(LLMConfig(api_key="scripted", model="scripted", small_model="scripted"))
        self.handlers = {**DEFAULT_HANDLERS, **(handlers or {})}
        self.delay = delay
        self.calls: list[ScriptedCall] = []

    async def generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int | None = None,
        model_size: ModelSize = ModelSize.medium,
        group_id: str | None = None,
        prompt_name: str | None = None,
        *,
        attribute_extraction: bool = False,
        model: str | None = None,
    ) -> dict[str, Any]:
        """Answer from the handler registered for `response_model`."""
        name = response_model.__name__ if response_model is not None else "none"
        call = ScriptedCall(prompt_name, name, "\n".join(message.content for message in messages))
        self.calls.append(call)
        handler = self.handlers.get(name)
        if handler is None:
            raise ScriptedLLMError(f"no scripted answer for {name} (prompt {prompt_name})")
        if self.delay:
            await asyncio.sleep(self.delay)
        answer = handler(call)
        if response_model is not None:
            # Validate like a real client would, so a wrong script fails here and not deep in graphiti.
            answer = response_model.model_validate(answer).model_dump()
        # Tokens as a provider would bill them: the real prompt in, the JSON answer out.
        counter = get_counter()
        record_call(
            "graph", input_tokens=counter.count(call.text), output_tokens=counter.count(json.dumps(answer))
        )
        return answer

    async def _generate_response(
        self,
        messages: list[Message],
        response_model: type[BaseModel] | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        model_size: ModelSize = ModelSize.medium,
        *,
        model: str | None = None,
    ) -> dict[str, Any]:
        return await self.generate_response(messages, response_model, max_tokens, model_size, model=model)
